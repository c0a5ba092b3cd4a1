import { expect } from "chai";
import { cliEnv, runCli, startTestApp, type TestApp } from "../support/app.js";
import { FRAUD_TEST_ENV, FraudCustomer } from "../support/fraud-customer.js";
import { SmsReceiver } from "../support/receivers.js";
import type { Json } from "../support/rest.js";

/**
 * `ringfence fraud` as operators run it: the built CLI (dist/cli.js, rebuilt by `npm run build`)
 * against the data of a running service, whose sends then obey what it set.
 */
describe("ringfence fraud (CLI)", function () {
  this.timeout(60_000);
  let app: TestApp;
  let sms: SmsReceiver;
  let env: Record<string, string>;
  let nextNumber = 612_350_000;
  const fr = () => `+33${(nextNumber += 1000)}`;

  before(async () => {
    sms = await SmsReceiver.start();
    app = await startTestApp({ SMS_PROVIDER: "http", SMS_HTTP_URL: sms.url, ...FRAUD_TEST_ENV });
    env = cliEnv(app.config);
  });
  after(async () => {
    await app.stop();
    await sms.close();
  });

  async function ok(args: string[]): Promise<Json> {
    const r = await runCli(["fraud", ...args], env, true);
    expect(r.stderr).to.equal("");
    expect(r.code).to.equal(0);
    return JSON.parse(r.stdout) as Json;
  }

  async function usage(args: string[], mentions: string): Promise<void> {
    const r = await runCli(["fraud", ...args], env, true);
    expect(r.code, r.stderr).to.equal(2);
    expect(r.stdout).to.equal("");
    expect(r.stderr.trim().split("\n")).to.have.length(1);
    expect(r.stderr).to.include(mentions);
  }

  it("sets shadow mode: sends over the surge bound are still sent, and would_block is recorded", async () => {
    const c = await FraudCustomer.create(app, sms);
    expect(await ok(["mode", "--account", c.uuid, "shadow"])).to.deep.equal({
      account: c.uuid,
      mode: "shadow",
    });
    const phones = [fr(), fr(), fr(), fr()];
    for (const p of phones) expect((await c.v2(p)).status).to.equal("success");
    await c.delivered(...phones);
    const last = phones[3] ?? "";
    const listed = await ok(["decisions", "--account", c.uuid]);
    expect((listed.decisions as Json[]).map((d) => [d.action, d.rule, d.phone_number])).to.deep.equal([
      ["would_block", "destination_surge", `${last.slice(0, -4)}**${last.slice(-2)}`],
    ]);
    const future = new Date(Date.now() + 60_000).toISOString();
    expect(await ok(["decisions", "--account", c.uuid, "--since", future])).to.deep.equal({ decisions: [] });

    const insights = await ok(["insights", "--account", c.uuid]);
    expect(insights.group_by).to.equal("country");
    expect(insights.groups).to.deep.equal([
      { key: "FR", sent: 4, verified: 0, conversion_rate: 0, blocked: 0 },
    ]);
    const byPrefix = await ok(["insights", "--account", c.uuid, "--group-by", "prefix"]);
    expect((byPrefix.groups as Json[]).map((g) => g.key)).to.deep.equal([last.slice(0, 7)]);
  });

  it("blocks and trusts a country, trusts a number and a prefix, for an account and for an app", async () => {
    const c = await FraudCustomer.create(app, sms);
    expect(await ok(["geo", "--account", c.uuid, "--country", "fr", "--mode", "block"])).to.deep.equal({
      account: c.uuid,
      country: "FR",
      mode: "block",
    });
    expect(await c.v1(fr())).to.include({ status: "spam_detected" });
    await ok(["geo", "--account", c.uuid, "--country", "FR", "--mode", "trust"]);
    expect(await c.policy()).to.deep.equal({ "g:FR": "trust" });
    await ok(["geo", "--account", c.uuid, "--country", "FR", "--mode", "allow"]);

    const number = fr();
    expect(await ok(["trust", "add", "--account", c.uuid, "--number", number])).to.deep.equal({
      account: c.uuid,
      number,
      trusted: true,
      changed: true,
    });
    expect(await ok(["trust", "add", "--account", c.uuid, "--prefix", "+3361"])).to.include({
      prefix: "+3361",
      changed: true,
    });
    expect(await c.policy()).to.deep.equal({ [`t:${number}`]: "1", "t:+3361": "1" });
    expect(await ok(["trust", "remove", "--account", c.uuid, "--prefix", "+3361"])).to.deep.equal({
      account: c.uuid,
      prefix: "+3361",
      trusted: false,
      changed: true,
    });
    expect(await c.policy()).to.deep.equal({ [`t:${number}`]: "1" });

    const { app: made } = await app.registry.apps.create("Fraud CLI");
    expect(await ok(["mode", "--app", made.appId, "off"])).to.deep.equal({ app: made.appId, mode: "off" });
    await ok(["trust", "add", "--app", made.appId, "--prefix", "+1555"]);
    expect(await app.registry.redis.hgetall(app.registry.fraud.keys.policy(made.appId))).to.deep.equal({
      mode: "off",
      "t:+1555": "1",
    });
    expect(await ok(["decisions", "--app", made.appId])).to.deep.equal({ decisions: [] });
  });

  it("prints insights and decisions a page at a time, --page-token giving the next", async function () {
    this.timeout(120_000);
    // From the sources: the options are newer than a build made before them.
    const fromSources = async (args: string[]) => {
      const r = await runCli(["fraud", ...args], env);
      return { ...r, json: r.code === 0 ? (JSON.parse(r.stdout) as Json) : {} };
    };
    const c = await FraudCustomer.create(app, sms);
    const [a, b] = [fr(), fr().replace(/^\+3361/, "+3362")];
    for (const p of [a, b]) expect((await c.v2(p)).status).to.equal("success");
    const first = await fromSources([
      "insights",
      "--account",
      c.uuid,
      "--group-by",
      "prefix",
      "--limit",
      "1",
    ]);
    expect(first.code, first.stderr).to.equal(0);
    expect((first.json.groups as Json[]).map((g) => g.key)).to.deep.equal([a.slice(0, 7)]);
    const token = String(first.json.next_page_token);
    const second = await fromSources([
      "insights",
      "--account",
      c.uuid,
      "--limit",
      "1",
      "--page-token",
      token,
    ]);
    expect(second.code, second.stderr).to.equal(0);
    expect(second.json).to.deep.include({ group_by: "prefix" });
    expect((second.json.groups as Json[]).map((g) => g.key)).to.deep.equal([b.slice(0, 7)]);
    expect(second.json).not.to.have.property("next_page_token");
    const bad = await fromSources(["decisions", "--account", c.uuid, "--page-token", token]);
    expect(bad.code).to.equal(2);
    expect(bad.stderr).to.include("--page-token:");
  });

  it("refuses bad input with exit 2 and one line naming it, changing nothing", async () => {
    const c = await FraudCustomer.create(app, sms);
    await ok(["mode", "--account", c.uuid, "shadow"]);
    const before = await c.policy();
    await usage(["geo", "--account", c.uuid, "--country", "ZZ", "--mode", "block"], '--country: "ZZ"');
    await usage(["geo", "--account", c.uuid, "--country", "FR", "--mode", "deny"], '--mode: "deny"');
    await usage(["mode", "--account", c.uuid, "loud"], 'mode: "loud"');
    await usage(["trust", "add", "--account", c.uuid, "--prefix", "+33a"], '--prefix: "+33a"');
    await usage(["trust", "add", "--account", c.uuid, "--number", "+336"], '--number: "+336"');
    await usage(["trust", "add", "--account", c.uuid], "--number E164 and --prefix");
    await usage(["insights", "--account", c.uuid, "--group-by", "city"], '--group-by: "city"');
    await usage(["decisions", "--account", c.uuid, "--since", "yesterday"], '--since: "yesterday"');
    await usage(["decisions", "--account", c.uuid, "--limit", "0"], '--limit: "0"');
    await usage(["mode", "shadow"], "--account UUID and --app APP_ID");
    await usage(["mode", "--account", c.uuid, "--app", "app_0123456789abcdef", "off"], "exactly one");
    await usage(["mode", "--account", "not-a-uuid", "off"], '"not-a-uuid"');
    await usage(["mode", "--account", "00000000-0000-4000-8000-000000000000", "off"], "no account");
    await usage(["mode", "--app", "app_0123456789abcdefXYZ", "off"], "no app");
    expect(await c.policy()).to.deep.equal(before);
  });

  it("describes every fraud command in --help", async () => {
    const top = await runCli(["fraud", "--help"], env, true);
    expect(top.code).to.equal(0);
    for (const name of ["mode", "geo", "trust", "decisions", "insights"]) expect(top.stdout).to.include(name);
    const geo = await runCli(["fraud", "geo", "--help"], env, true);
    expect(geo.stdout).to.include("--country <cc>").and.include("allow, block or trust").and.include("--app");
  });
});
