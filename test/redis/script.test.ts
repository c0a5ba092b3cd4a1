import { readdirSync, readFileSync } from "node:fs";
import { expect } from "chai";
import { Redis } from "ioredis";
import { RingfenceError } from "../../src/errors.js";
import { declaredInputs, defineScript } from "../../src/redis/script.js";
import { testRedisUrl } from "../support/hooks.js";
import { luaFile } from "../support/lua.js";

/** Every Lua file of src/ (each script's caller names its inputs through defineScript). */
const SCRIPTS = readdirSync(new URL("../../src/", import.meta.url), { recursive: true, encoding: "utf8" })
  .filter((f) => f.endsWith(".lua"))
  .map((f) => new URL(`../../src/${f}`, import.meta.url));

describe("script contract", () => {
  let redis: Redis;
  before(() => {
    redis = new Redis(testRedisUrl());
  });
  after(() => {
    redis.disconnect();
  });

  it("sends named keys and arguments in the order the file names them", async () => {
    const script = defineScript({
      file: luaFile(
        [
          "-- Answers its inputs in order.",
          "local authKey = KEYS[1]",
          "local eventsKey = KEYS[2]",
          "local windowKeys = { unpack(KEYS, 3) }",
          "local now = tonumber(ARGV[1])",
          "local member = ARGV[2]",
          "return {authKey, eventsKey, windowKeys[1] or '', windowKeys[2] or '', tostring(now), member or ''}",
        ].join("\n"),
      ),
      keys: ["auth", "events"],
      rest: "window",
      argv: ["now", "member"],
    });
    const reply = await script.run(redis, { events: "e{t}", auth: "a{t}" }, { member: "m", now: 7 }, [
      "w1{t}",
      "w2{t}",
    ]);
    expect(reply).to.deep.equal(["a{t}", "e{t}", "w1{t}", "w2{t}", "7", "m"]);
    // Optional arguments come last and are left out when undefined.
    expect(
      await script.run(redis, { auth: "a{t}", events: "e{t}" }, { now: 1, member: undefined }),
    ).to.deep.equal(["a{t}", "e{t}", "", "", "1", ""]);
  });

  it("reads a tail of keys copied by a loop, longer than Lua's unpack can return", async () => {
    const script = defineScript({
      file: luaFile(
        [
          "local authKey = KEYS[1]",
          "local otherKeys = {} for i = 2, #KEYS do otherKeys[#otherKeys + 1] = KEYS[i] end",
          "return {authKey, #otherKeys, otherKeys[#otherKeys]}",
        ].join("\n"),
      ),
      keys: ["auth"],
      rest: "other",
      argv: [],
    });
    const others = Array.from({ length: 9000 }, (_, i) => `o${i}{t}`);
    expect(await script.run(redis, { auth: "a{t}" }, {}, others)).to.deep.equal(["a{t}", 9000, "o8999{t}"]);
    expect(() =>
      defineScript({
        file: luaFile(
          "local authKey = KEYS[1]\nlocal otherKeys = {} for i = 3, #KEYS do otherKeys[#otherKeys + 1] = KEYS[i] end\n",
        ),
        keys: ["auth"],
        rest: "other",
        argv: [],
      }),
    ).to.throw(/other from KEYS\[3\]/);
  });

  it("refuses at load a caller whose names or order differ from the file's", () => {
    const file = luaFile(
      "local authKey = KEYS[1]\nlocal eventsKey = KEYS[2]\nlocal now = ARGV[1]\nreturn 1\n",
    );
    expect(() => defineScript({ file, keys: ["events", "auth"], argv: ["now"] })).to.throw(
      /probe\.lua declares KEYS \["auth","events"\]/,
    );
    expect(() => defineScript({ file, keys: ["auth"], argv: ["now"] })).to.throw(/declares KEYS/);
    expect(() => defineScript({ file, keys: ["auth", "events"], argv: ["later"] })).to.throw(/ARGV/);
    expect(() => defineScript({ file, keys: ["auth", "events"], rest: "window", argv: ["now"] })).to.throw(
      /declares KEYS/,
    );
  });

  it("turns a {'refused', code} reply into that error of src/errors.ts, whatever the script", async () => {
    const script = defineScript({
      file: luaFile("local accountKey = KEYS[1]\nreturn {'refused', 'negative_balance'}\n"),
      keys: ["account"],
      argv: [],
    });
    const err = await script.run(redis, { account: "acct{c}" }, {}).catch((e: unknown) => e);
    expect(err).to.be.instanceOf(RingfenceError);
    expect((err as RingfenceError).code).to.equal("negative_balance");
    expect((err as RingfenceError).message).to.equal("the account balance is too low to send a message");
  });

  it("names KEYS and ARGV only at the top of every script, and answers tables, never bare numbers", () => {
    expect(SCRIPTS.length).to.be.greaterThan(25);
    for (const url of SCRIPTS) {
      const source = readFileSync(url, "utf8");
      if (!/KEYS\[/.test(source)) continue; // a library of functions (window.lua, stream.lua, ...)
      const { keys, rest } = declaredInputs(source);
      expect(keys.length + (rest === undefined ? 0 : 1), url.pathname).to.be.greaterThan(0);
      // No bare KEYS[n] or ARGV[n] in the body: only the declarations at the top use them.
      const body = source
        .split("\n")
        .filter(
          (l) =>
            !l.startsWith("--") &&
            !/^local \w+ = .*(KEYS|ARGV)\[\d+\]/.test(l) &&
            !/^local (\w+)Keys = \{\} for i = \d+, #KEYS do \1Keys\[#\1Keys \+ 1\] = KEYS\[i\] end$/.test(l),
        );
      expect(body.join("\n"), url.pathname).not.to.match(/\b(KEYS|ARGV)\[/);
      expect(body.join("\n"), url.pathname).not.to.match(/\breturn -?\d/);
    }
  });
});
