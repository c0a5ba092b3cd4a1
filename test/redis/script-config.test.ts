import { readFileSync } from "node:fs";
import { expect } from "chai";
import { Redis } from "ioredis";
import { FRAUD_LIBRARY } from "../../src/fraud/engine.js";
import { FraudKeys } from "../../src/fraud/keys.js";
import { Keys } from "../../src/redis/client.js";
import { defineScript } from "../../src/redis/script.js";
import { VerifyKeys } from "../../src/verify/keys.js";
import { ROW_EVENTS_LIBRARY } from "../../src/verify/row.js";
import { testRedisUrl } from "../support/hooks.js";
import { luaFile } from "../support/lua.js";

/** Runs `body` after a library of src/ (its local functions in scope), with `keys` and `argv`. */
async function withLibrary(redis: Redis, library: URL, body: string, keys: string[], argv: string[] = []) {
  return redis.eval(`${readFileSync(library, "utf8")}\n${body}`, keys.length, ...keys, ...argv);
}

describe("script configuration and the keys scripts name themselves", () => {
  let redis: Redis;
  before(() => {
    redis = new Redis(testRedisUrl());
  });
  after(() => {
    redis.disconnect();
  });

  const probe = defineScript({
    file: luaFile(
      [
        "-- Answers a setting of its configuration and its argument.",
        "local n = ARGV[1]",
        "return {CONFIG.limits.number.limit, CONFIG.name, n}",
      ].join("\n"),
    ),
    keys: [],
    argv: ["n"],
  });

  it("carries a configuration in the script's text, one script per configuration object, not in the call", async () => {
    const a = { limits: { number: { limit: 5, windowSeconds: 600 } }, name: "a" };
    // A value holding what would close a Lua long string stays whole.
    const b = { limits: { number: { limit: 7, windowSeconds: 60 } }, name: "b]]c]=]" };
    expect(probe.configured(a)).to.equal(probe.configured(a));
    expect(probe.configured(a).lua.sha).to.not.equal(probe.configured(b).lua.sha);
    expect(await probe.configured(a).run(redis, {}, { n: "1" })).to.deep.equal([5, "a", "1"]);
    expect(await probe.configured(b).run(redis, {}, { n: "2" })).to.deep.equal([7, "b]]c]=]", "2"]);
    // Run again: by its SHA now, the text loaded.
    expect(await probe.configured(b).run(redis, {}, { n: "3" })).to.deep.equal([7, "b]]c]=]", "3"]);
  });

  it("names a send's fraud keys in engine.lua as src/fraud/keys.ts names them", async () => {
    const keys = new FraudKeys(new Keys("rf:"));
    const tenant = "7e8867fc-1142-48f0-a573-1ad1864d2484";
    const e164 = "+33612345678";
    const dests = ["c:FR", "n:208-10", "p:+336123"];
    const tail = [keys.number(tenant, "n1"), keys.source(tenant, "s1")];
    const named = await withLibrary(
      redis,
      FRAUD_LIBRARY,
      [
        "local k = fraud_keys(KEYS[1], { KEYS[2], KEYS[3] }, cjson.decode(ARGV[1]))",
        "local out = { k.policy, k.all, k.index, k.decisions, k.sent }",
        "for _, key in ipairs(k.dests) do out[#out + 1] = key end",
        "for _, kind in ipairs({ 'c', 'n', 'p' }) do",
        "  for _, key in ipairs(fraud_rank_keys(k.index, kind, tonumber(ARGV[2]))) do out[#out + 1] = key end",
        "end",
        "return out",
      ].join("\n"),
      [keys.policy(tenant), ...tail],
      [JSON.stringify({ dests, e164 }), "20784"],
    );
    expect(named).to.deep.equal([
      keys.policy(tenant),
      keys.counters(tenant, "all"),
      keys.index(tenant),
      keys.decisions(tenant),
      keys.sent(tenant, e164),
      ...dests.map((d) => keys.counters(tenant, d)),
      ...tail,
      ...["c", "n", "p"].flatMap((kind) => [
        keys.rank(tenant, 1, kind, 20784),
        keys.rank(tenant, 2, kind, 20784),
        keys.rank(tenant, 2, kind, 20785),
      ]),
    ]);
  });

  it("names an authentication's event list and webhook hook in row-events.lua as src/verify/keys.ts does", async () => {
    const k = new VerifyKeys(new Keys("rf:")).auth("7e8867fc-1142-48f0-a573-1ad1864d2484", "a1b2");
    const named = await withLibrary(
      redis,
      ROW_EVENTS_LIBRARY,
      "local eventsKey, hookKey = row_event_keys(KEYS[1])\nreturn { eventsKey, hookKey }",
      [k.auth],
    );
    expect(named).to.deep.equal([k.events, k.hook]);
  });
});
