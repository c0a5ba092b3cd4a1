import { expect } from "chai";
import { once } from "node:events";
import { createWriteStream, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { cliEnv, runCli, startTestApp, type TestApp } from "./support/app.js";
import { rest } from "./support/rest.js";
import { keysAddedSince, keysUnder, startRedis } from "./support/redis.js";
import { randomBytes } from "node:crypto";
import { Redis } from "ioredis";
import { RedisLookupData } from "../src/lookup/lookup-data.js";
import { Keys } from "../src/redis/client.js";

describe("ringfence CLI", function () {
  // Each command is a fresh Node process compiling TypeScript: seconds apiece on a loaded machine.
  this.timeout(90_000);
  let app: TestApp;
  let env: Record<string, string>;
  const dir = mkdtempSync(join(tmpdir(), "ringfence-cli-"));

  before(async () => {
    app = await startTestApp();
    env = cliEnv(app.config);
  });
  after(async () => {
    await app.stop();
  });

  /** Progress lines a long command writes on stderr, beside its JSON answer on stdout. */
  const PROGRESS =
    /^ringfence: lookup-data import: (checked|written) \d+( of \d+)? rows \(\d+\.\d s, peak \d+ MB\)$/;

  async function ok(args: string[]): Promise<Record<string, unknown>> {
    const r = await runCli(args, env);
    const lines = r.stderr.split("\n").filter((l) => l !== "");
    expect(
      lines.filter((l) => !PROGRESS.test(l)),
      r.stderr,
    ).to.deep.equal([]);
    expect(r.code).to.equal(0);
    return JSON.parse(r.stdout) as Record<string, unknown>;
  }

  async function usage(args: string[], mentions: string) {
    const r = await runCli(args, env);
    expect(r.code, r.stderr).to.equal(2);
    expect(r.stdout).to.equal("");
    expect(r.stderr.trim().split("\n")).to.have.length(1);
    expect(r.stderr).to.include(mentions);
  }

  it("creates an account whose key looks up +33612345678 over REST (the README walk-through)", async () => {
    const created = await ok([
      "accounts",
      "create",
      "--name",
      "Acme",
      "--balance",
      "10.00",
      "--regions",
      "FR,US",
    ]);
    expect(Object.keys(created).sort()).to.deep.equal(["api_key", "customer_uuid", "webhook_secret"]);
    const res = await rest(app.baseUrl).get("/v1/lookup/+33612345678", {
      "customer-uuid": String(created.customer_uuid),
      "x-api-key": String(created.api_key),
    });
    expect(res.status).to.equal(200);
    expect(res.body).to.include({ country_code: "FR", line_type: "Mobile", mcc: "208" });
  });

  it("shows an account without its secrets, and never stores them in clear", async () => {
    const created = await ok(["accounts", "create", "--name", "Shown", "--spending-limit", "50", "--cnam"]);
    const shown = await ok(["accounts", "show", String(created.customer_uuid)]);
    expect(shown).to.deep.include({
      customer_uuid: created.customer_uuid,
      name: "Shown",
      status: "active",
      balance: "0.00",
      spending_limit: "50.00",
      features: ["cnam"],
      regions: [],
    });
    const text = JSON.stringify(shown);
    expect(text).not.to.include(String(created.api_key));
    const stored = await app.registry.redis.hgetall(
      app.registry.keys.key("acct", String(created.customer_uuid)),
    );
    const all = JSON.stringify(stored);
    expect(all).not.to.include(String(created.api_key));
    expect(all).not.to.include(String(created.webhook_secret));
  });

  it("suspends, resumes and credits an account", async () => {
    const { customer_uuid: id } = await ok(["accounts", "create", "--name", "Life", "--balance", "1.5"]);
    expect(await ok(["accounts", "suspend", String(id)])).to.deep.equal({
      customer_uuid: id,
      status: "suspended",
    });
    expect(await ok(["accounts", "show", String(id)])).to.include({ status: "suspended" });
    expect(await ok(["accounts", "resume", String(id)])).to.deep.equal({
      customer_uuid: id,
      status: "active",
    });
    expect(await ok(["accounts", "credit", String(id), "2.25"])).to.deep.equal({
      customer_uuid: id,
      balance: "3.75",
    });
    expect(await ok(["accounts", "credit", String(id), "-4"])).to.deep.equal({
      customer_uuid: id,
      balance: "-0.25",
    });
  });

  it("refuses bad input with exit 2 and one line naming the problem, changing nothing", async () => {
    // This app's keys only: the run's Redis is shared, and other tests' keys expire meanwhile.
    const ownKeys = async () => (await app.registry.redis.keys(`${app.config.REDIS_KEY_PREFIX}*`)).length;
    const before = await ownKeys();
    await usage(["accounts", "create"], "--name");
    await usage(["accounts", "create", "--name", "X", "--balance", "ten"], "ten");
    await usage(["accounts", "create", "--name", "X", "--regions", "FRA"], "FRA");
    await usage(["accounts", "create", "--name", "  "], "name");
    await usage(["accounts", "suspend", "not-a-uuid"], "not-a-uuid");
    await usage(["accounts", "show", "6f1c1f3e-4f0b-4d8e-9a57-2f1f0c5a9b10"], "no account");
    await usage(["accounts", "credit", "6f1c1f3e-4f0b-4d8e-9a57-2f1f0c5a9b10", "1"], "no account");
    await usage(["nonsense"], "nonsense");
    await usage(["apps", "create"], "--name");
    await usage(["apps", "show"], "app_id");
    await usage(["users", "create"], "--app");
    expect(await ownKeys()).to.equal(before);
  });

  it("stops with one line naming the variable when the configuration is bad", async () => {
    const r = await runCli(["accounts", "show", "6f1c1f3e-4f0b-4d8e-9a57-2f1f0c5a9b10"], {
      ...env,
      REDIS_URL: "http://nope",
    });
    expect(r.code).to.equal(2);
    expect(r.stderr.trim().split("\n")).to.have.length(1);
    expect(r.stderr).to.include("REDIS_URL");
  });

  it("refuses, exit 2 with one line naming SECRETS_KEY, a Redis sealed with another SECRETS_KEY, writing nothing", async () => {
    const keysBefore = await keysUnder(app.registry.redis, app.config.REDIS_KEY_PREFIX);
    const other = randomBytes(32).toString("base64");
    const r = await runCli(["accounts", "create", "--name", "Wrong key"], { ...env, SECRETS_KEY: other });
    expect(r.code, r.stderr).to.equal(2);
    expect(r.stdout).to.equal("");
    expect(r.stderr.trim().split("\n")).to.deep.equal([
      `ringfence: invalid SECRETS_KEY: the data in Redis under REDIS_KEY_PREFIX "${app.config.REDIS_KEY_PREFIX}" was sealed with another SECRETS_KEY`,
    ]);
    expect(r.stderr).to.not.include(other);
    expect(await keysAddedSince(app.registry.redis, app.config.REDIS_KEY_PREFIX, keysBefore)).to.deep.equal(
      [],
    );
    // The service's own key still works.
    expect((await ok(["accounts", "create", "--name", "Right key"])).customer_uuid).to.be.a("string");
  });

  it("refuses another SECRETS_KEY on data stored before the key check value existed (by its signing key)", async () => {
    const check = app.registry.keys.key("secrets", "check");
    const stored = await app.registry.redis.get(check);
    expect(stored, "the service stored its check value").to.match(/^[0-9a-f]{64}$/);
    await app.registry.redis.del(check);
    try {
      const r = await runCli(["accounts", "show", "6f1c1f3e-4f0b-4d8e-9a57-2f1f0c5a9b10"], {
        ...env,
        SECRETS_KEY: randomBytes(32).toString("base64"),
      });
      expect(r.code, r.stderr).to.equal(2);
      expect(r.stderr.trim().split("\n")).to.have.length(1);
      expect(r.stderr).to.match(/^ringfence: invalid SECRETS_KEY: /);
      expect(await app.registry.redis.get(check), "nothing written for the wrong key").to.equal(null);
    } finally {
      await app.registry.redis.set(check, stored ?? "");
    }
  });

  it("prints help for every command", async () => {
    const r = await runCli(["--help"], env);
    expect(r.code).to.equal(0);
    for (const word of ["serve", "accounts", "lookup-data"]) expect(r.stdout).to.include(word);
    const sub = await runCli(["accounts", "create", "--help"], env);
    expect(sub.stdout).to.include("--spending-limit");
    // Amounts in the unit users type, defaults included: never micro-units.
    expect(sub.stdout.replace(/\s+/g, " ")).to.include("(default: 100.00)");
    expect(sub.stdout.replace(/\s+/g, " ")).to.include("(default: 0.00)");
    expect(sub.stdout).to.not.include("100000000");
  });

  it("prints its version with --version and -V", async () => {
    const { version } = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as {
      version: string;
    };
    for (const flag of ["--version", "-V"]) {
      const r = await runCli([flag], env);
      expect(r.code, flag).to.equal(0);
      expect(r.stdout, flag).to.equal(`${version}\n`);
    }
  });

  it("sets sender IDs at creation and message variants per language", async () => {
    const { customer_uuid: id } = await ok([
      "accounts",
      "create",
      "--name",
      "Brand",
      "--sender-ids",
      "Acme,Acme2",
    ]);
    expect(await ok(["accounts", "template", String(id), "brand", "fr", "Acme : code {code}"])).to.deep.equal(
      {
        customer_uuid: id,
        template_id: "brand",
        language: "fr",
      },
    );
    expect(await ok(["accounts", "show", String(id)])).to.deep.include({
      sender_ids: ["Acme", "Acme2"],
      templates: { brand: { fr: "Acme : code {code}" } },
    });
    await usage(["accounts", "template", String(id), "brand", "fr", "no placeholder"], "{code}");
    await usage(["accounts", "template", String(id), "bad id!", "fr", "{code}"], "template");
    await usage(
      ["accounts", "create", "--name", "X", "--sender-ids", "Way-Too-Long-Sender"],
      "Way-Too-Long-Sender",
    );
  });

  it("sets the channels V2 may use, in fallback order, and refuses bad ones changing nothing (9.3)", async () => {
    const { customer_uuid: id } = await ok(["accounts", "create", "--name", "Channels"]);
    expect(await ok(["accounts", "show", String(id)])).to.deep.include({ channels: ["sms"] });
    expect(await ok(["accounts", "channels", String(id), "whatsapp,sms,voice"])).to.deep.equal({
      customer_uuid: id,
      channels: ["whatsapp", "sms", "voice"],
    });
    expect(await ok(["accounts", "show", String(id)])).to.deep.include({
      channels: ["whatsapp", "sms", "voice"],
    });
    expect((await ok(["accounts", "channels", String(id), "email"])).channels).to.deep.equal(["email"]);
    for (const [list, mentions] of [
      ["sms,fax", 'channel "fax" is not one of sms, whatsapp, voice, email'],
      ["sms,sms", 'channel "sms" is named twice'],
      ["", 'channel "" is not one of'],
    ] as const) {
      await usage(["accounts", "channels", String(id), list], mentions);
    }
    await usage(["accounts", "channels", "7d6a1b0e-5c1f-4c5e-9f59-3d1b4f3c2a10", "sms"], "no account");
    expect(await ok(["accounts", "show", String(id)])).to.deep.include({ channels: ["email"] });
  });

  it("imports lookup data that lookups then return", async () => {
    const created = await ok(["accounts", "create", "--name", "Cnam", "--cnam"]);
    const file = join(dir, "numbers.csv");
    writeFileSync(
      file,
      "phone_number,number_ported,caller_name,temporary_phone_number,line_type\n" +
        "+33612345679,true,Paul Durand,,\n" +
        "+33612345680,,,true,PayPhone\n",
    );
    expect(await ok(["lookup-data", "import", file])).to.deep.equal({ imported: 2 });
    const headers = { "customer-uuid": String(created.customer_uuid), "x-api-key": String(created.api_key) };
    const a = await rest(app.baseUrl).get("/v1/lookup/+33612345679?type=cnam", headers);
    expect(a.body).to.include({
      number_ported: true,
      caller_name: "Paul Durand",
      temporary_phone_number: false,
    });
    const b = await rest(app.baseUrl).get("/v1/lookup/+33612345680", headers);
    expect(b.body).to.include({
      number_ported: false,
      temporary_phone_number: true,
      line_type: "PayPhone",
    });
  });

  it("imports 1,000,000 rows in bounded memory (under 200 MB), showing progress, all of them stored", async function () {
    this.timeout(240_000);
    const file = join(dir, "million.csv");
    const rows = 1_000_000;
    const out = createWriteStream(file);
    out.write("phone_number,number_ported,caller_name,temporary_phone_number,line_type\n");
    for (let i = 0; i < rows; i++) {
      const line = `+336${String(i).padStart(8, "0")},${i % 2 === 1 ? "true" : ""},${i % 3 === 0 ? `Name ${i}` : ""},,${i % 50 === 0 ? "PayPhone" : ""}\n`;
      if (!out.write(line)) await once(out, "drain");
    }
    out.end();
    await once(out, "finish");
    // A Redis of its own: a million keys in the run's shared one would slow every later scan.
    const own = await startRedis();
    const redis = new Redis(own.url);
    try {
      // The built CLI, as operators run it (the sources would add the TypeScript loader's memory).
      const r = await runCli(["lookup-data", "import", file], { ...env, REDIS_URL: own.url }, true);
      expect(r.code, r.stderr).to.equal(0);
      expect(JSON.parse(r.stdout)).to.deep.equal({ imported: rows });
      const lines = r.stderr.trim().split("\n");
      expect(
        lines.every((l) => PROGRESS.test(l)),
        r.stderr,
      ).to.equal(true);
      expect(lines).to.satisfy((ls: string[]) => ls.some((l) => l.includes(`checked ${rows} rows`)));
      const last = lines.at(-1) ?? "";
      expect(last).to.include(`written ${rows} of ${rows} rows`);
      // The process's peak resident memory (worker thread included), as the CLI reads it.
      const peakMb = Number(/peak (\d+) MB/.exec(last)?.[1]);
      expect(peakMb).to.be.greaterThan(0).and.lessThan(200);
      const lookup = new RedisLookupData(redis, new Keys(app.config.REDIS_KEY_PREFIX));
      expect(await lookup.get("+33600000000")).to.deep.equal({ callerName: "Name 0", lineType: "PayPhone" });
      expect(await lookup.get("+33600999999")).to.deep.equal({
        numberPorted: true,
        callerName: "Name 999999",
      });
      expect(await lookup.get("+33600500003")).to.deep.equal({ numberPorted: true });
    } finally {
      redis.disconnect();
      await own.stop();
    }
  });

  it("rejects a whole import file for one bad row, naming its line, and writes nothing", async () => {
    const file = join(dir, "bad.csv");
    writeFileSync(file, "phone_number,caller_name\n+33612345681,Good Row\n+1555,Bad Row\n");
    await usage(["lookup-data", "import", file], "line 3");
    // A bad row after many good ones: still nothing written (every row is checked first).
    const long = ["phone_number,caller_name"];
    for (let i = 0; i < 20_000; i++) long.push(`+3361${String(i).padStart(7, "0")},Row ${i}`);
    long.push("+1555,Bad Row");
    writeFileSync(file, long.join("\n") + "\n");
    await usage(["lookup-data", "import", file], "line 20002");
    expect(await app.registry.lookupData.get("+33610000000")).to.equal(undefined);
    const stored = await app.registry.lookupData.get("+33612345681");
    expect(stored).to.equal(undefined);
    writeFileSync(file, "phone_number,colour\n+33612345681,blue\n");
    await usage(["lookup-data", "import", file], "colour");
    writeFileSync(file, "phone_number,line_type\n+33612345681,Cellular\n");
    await usage(["lookup-data", "import", file], "line_type");
    await usage(["lookup-data", "import", join(dir, "missing.csv")], "missing.csv");
  });
});
