import { expect } from "chai";
import { FraudInputError, FraudPolicy } from "../../src/fraud/policy.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { FRAUD_TEST_ENV, FraudCustomer } from "../support/fraud-customer.js";
import { SmsReceiver } from "../support/receivers.js";

/**
 * A tenant's fraud policy (docs/fraud.md#modes-geo-permissions-and-trusted-numbers), written by the
 * policy store and obeyed by the engine inside the real send scripts, over REST: each destination
 * gets 3 sends per hour here (FRAUD_NEW_DESTINATION_SENDS=3).
 */
describe("fraud policy: modes, geo permissions, trusted numbers", function () {
  this.timeout(30_000);
  let app: TestApp;
  let sms: SmsReceiver;
  let policy: FraudPolicy;
  let nextNumber = 612_340_000;
  /** A French mobile number (prefix +336123) in a SPAM_RANGE_BURST range of its own. */
  const fr = () => `+33${(nextNumber += 1000)}`;
  let nextEs = 612_340_000;
  const es = () => `+34${(nextEs += 1000)}`;

  before(async () => {
    sms = await SmsReceiver.start();
    app = await startTestApp({ SMS_PROVIDER: "http", SMS_HTTP_URL: sms.url, ...FRAUD_TEST_ENV });
    policy = new FraudPolicy(app.registry.redis, app.registry.fraud.keys);
  });
  after(async () => {
    await app.stop();
    await sms.close();
  });

  it("enforces by default: a new country's fourth send in the hour is blocked by destination_surge", async () => {
    const c = await FraudCustomer.create(app, sms);
    const phones = [fr(), fr(), fr(), fr()];
    const statuses = [];
    for (const p of phones) statuses.push((await c.v2(p)).status);
    expect(statuses).to.deep.equal(["success", "success", "success", "blocked"]);
    expect(await c.decisions()).to.have.length(1);
    expect((await c.decisions())[0]?.slice(0, 2)).to.deep.equal(["block", "destination_surge"]);
  });

  it("shadow mode: sends over the surge bound are still sent, and would_block is recorded", async () => {
    const c = await FraudCustomer.create(app, sms);
    expect(await policy.setMode(c.uuid, "shadow")).to.equal("shadow");
    expect(await c.policy()).to.deep.equal({ mode: "shadow" });
    const phones = [fr(), fr(), fr(), fr(), fr()];
    for (const p of phones) expect((await c.v2(p)).status).to.equal("success");
    await c.delivered(...phones);
    const decisions = await c.decisions();
    expect(decisions.map((d) => d.slice(0, 2))).to.deep.equal([
      ["would_block", "destination_surge"],
      ["would_block", "destination_surge"],
    ]);
    // Back to enforce: the field is removed, the engine's default.
    expect(await policy.setMode(c.uuid, "enforce")).to.equal("enforce");
    expect(await c.policy()).to.deep.equal({});
    expect((await c.v2(fr())).status).to.equal("blocked");
  });

  it("mode off: nothing is judged, every send goes out and no decision is recorded", async () => {
    const c = await FraudCustomer.create(app, sms);
    await policy.setMode(c.uuid, "off");
    const phones = [fr(), fr(), fr(), fr(), fr()];
    for (const p of phones) expect((await c.v2(p)).status).to.equal("success");
    await c.delivered(...phones);
    expect(await c.decisions()).to.deep.equal([]);
  });

  it("geo block: every send to the country is refused (rule geo), V1 spam_detected and V2 suspicious, nothing charged", async () => {
    const c = await FraudCustomer.create(app, sms);
    expect(await policy.setGeo(c.uuid, "fr", "block")).to.deep.equal({ country: "FR", mode: "block" });
    expect(await c.policy()).to.deep.equal({ "g:FR": "block" });
    const before = await c.balance();
    const [a, b] = [fr(), fr()];
    const v1 = await c.v1(a);
    expect(v1.status).to.equal("spam_detected");
    const v2 = await c.v2(b);
    expect(v2).to.deep.include({ status: "blocked", reason: "suspicious" });
    expect(await c.balance()).to.equal(before);
    // Another country still gets its code; once it arrived, the refused ones would have too.
    const other = es();
    expect((await c.v2(other)).status).to.equal("success");
    await c.delivered(other);
    expect(c.sentTo(a) + c.sentTo(b)).to.equal(0);
    expect(await c.decisions()).to.deep.equal([
      ["block", "geo", `${a.slice(0, -4)}**${a.slice(-2)}`],
      ["block", "geo", `${b.slice(0, -4)}**${b.slice(-2)}`],
    ]);
    // allow is the default: the field goes, and the country's sends are judged again.
    await policy.setGeo(c.uuid, "FR", "allow");
    expect(await c.policy()).to.deep.equal({});
    expect((await c.v2(fr())).status).to.equal("success");
  });

  it("geo trust: the adaptive rules are skipped for the country", async () => {
    const c = await FraudCustomer.create(app, sms);
    await policy.setGeo(c.uuid, "FR", "trust");
    for (let i = 0; i < 5; i++) expect((await c.v2(fr())).status).to.equal("success");
    expect(await c.decisions()).to.deep.equal([]);
  });

  it("a trusted number and a trusted prefix skip the adaptive rules; others stay blocked", async () => {
    const c = await FraudCustomer.create(app, sms);
    for (let i = 0; i < 3; i++) expect((await c.v2(fr())).status).to.equal("success");
    const [number, other] = [fr(), fr()];
    expect((await c.v2(number)).status).to.equal("blocked");
    expect(await policy.setTrusted(c.uuid, { number }, true)).to.deep.equal({ entry: number, changed: true });
    expect((await c.v2(number)).status).to.equal("success");
    expect((await c.v2(other)).status).to.equal("blocked");
    // A prefix: every number under it.
    const prefix = other.slice(0, 8);
    await policy.setTrusted(c.uuid, { prefix }, true);
    expect(await c.policy()).to.deep.equal({ [`t:${number}`]: "1", [`t:${prefix}`]: "1" });
    expect((await c.v2(other)).status).to.equal("success");
    expect((await c.v2(es())).status).to.equal("success");
    // Removed: judged again, and a second removal changes nothing.
    expect(await policy.setTrusted(c.uuid, { prefix }, false)).to.deep.equal({
      entry: prefix,
      changed: true,
    });
    expect((await policy.setTrusted(c.uuid, { prefix }, false)).changed).to.equal(false);
    expect((await c.v2(fr())).status).to.equal("blocked");
    expect(await policy.get(c.uuid)).to.deep.equal({ mode: "enforce", geo: {}, trusted: [number] });
  });

  it("refuses bad input naming what was wrong, and changes nothing", async () => {
    const c = await FraudCustomer.create(app, sms);
    await policy.setMode(c.uuid, "shadow");
    await policy.setGeo(c.uuid, "DE", "block");
    const before = await c.policy();
    const refused = async (work: () => Promise<unknown>, field: string, names: string) => {
      const err = await work().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).to.be.instanceOf(FraudInputError);
      expect((err as FraudInputError).field).to.equal(field);
      expect((err as FraudInputError).message).to.include(names);
    };
    await refused(() => policy.setGeo(c.uuid, "ZZ", "block"), "country", '"ZZ"');
    await refused(() => policy.setGeo(c.uuid, "FRA", "block"), "country", '"FRA"');
    await refused(() => policy.setGeo(c.uuid, "FR", "deny"), "mode", '"deny"');
    await refused(() => policy.setMode(c.uuid, "loud"), "mode", '"loud"');
    await refused(() => policy.setTrusted(c.uuid, { prefix: "+33a" }, true), "prefix", '"+33a"');
    await refused(() => policy.setTrusted(c.uuid, { prefix: "33612" }, true), "prefix", '"33612"');
    await refused(
      () => policy.setTrusted(c.uuid, { prefix: "+1234567890123456" }, true),
      "prefix",
      "+1234567890123456",
    );
    await refused(() => policy.setTrusted(c.uuid, { number: "+3361234" }, true), "number", '"+3361234"');
    await refused(
      () => policy.setTrusted(c.uuid, { number: "+33 6 12 34 56 78" }, true),
      "number",
      "+33 6 12",
    );
    expect(await c.policy()).to.deep.equal(before);
  });
});
