import { expect } from "chai";
import { FRAUD_ACTIONS, FRAUD_RULES } from "../../src/fraud/engine.js";
import { Customer, FraudRig, frNumber, FR_NETWORKS, sample } from "../support/fraud.js";
import { waitFor } from "../support/redis.js";

const PRICE = 50_000;

/** The decision records of a tenant, oldest first, as field maps. */
async function decisions(rig: FraudRig, tenant: string): Promise<Record<string, string>[]> {
  const key = rig.app.registry.fraud.keys.decisions(tenant);
  const entries = await rig.app.registry.redis.xrange(key, "-", "+");
  return entries.map(([, fields]) => {
    const out: Record<string, string> = {};
    for (let i = 0; i + 1 < fields.length; i += 2) out[fields[i] ?? ""] = fields[i + 1] ?? "";
    return out;
  });
}

/** `n` V1 sends to fresh numbers of one network that nobody enters; each must be sent. */
async function unconverted(c: Customer, network: keyof typeof FR_NETWORKS, from: number, n: number) {
  const phones: { phone: string; auth: string }[] = [];
  for (let i = from; i < from + n; i++) {
    const phone = frNumber(network, i);
    const sent = await c.v1Send(phone);
    expect(sent.body.status, `send ${i}: ${sent.text}`).to.equal("pending");
    phones.push({ phone, auth: String(sent.body.authentication_uuid) });
  }
  return phones;
}

describe("fraud engine: adaptive rules over REST (docs/fraud.md#how-it-decides)", () => {
  let rig: FraudRig;
  before(async function () {
    this.timeout(30_000);
    // The documented defaults (test/support/fraud.ts), retries without a wait between them, and
    // no share of the busiest day (it would add 0.1 send per conversion of today: judge.test.ts
    // covers it), so that each right code earns exactly FRAUD_CONVERSION_CREDIT sends.
    rig = await FraudRig.start({ OTP_RETRY_INTERVAL_SECONDS: "0", FRAUD_BASELINE_SHARE: "0" });
  });
  after(async () => rig.stop());

  it("gives a destination never served FRAUD_NEW_DESTINATION_SENDS (10) sends, then destination_surge blocks: V1 spam_detected, V2 blocked suspicious, nothing charged or sent", async function () {
    this.timeout(30_000);
    const c = await rig.account("New destination");
    const start = await c.balanceMicros();
    await unconverted(c, "bouygues", 0, 10);
    expect(rig.sms.messages.filter((m) => m.to.startsWith("+3366")).length).to.equal(10);
    expect(await c.balanceMicros()).to.equal(start - 10 * PRICE);

    const v1 = await c.v1Send(frNumber("bouygues", 10));
    expect(v1.status).to.equal(200);
    expect(v1.body.status).to.equal("spam_detected");
    const v2 = await c.v2Create(frNumber("bouygues", 11));
    expect(v2.status).to.equal(200);
    expect(v2.body).to.include({ status: "blocked", reason: "suspicious" });
    expect(v2.body.channels).to.deep.equal([]);

    expect(rig.smsTo(frNumber("bouygues", 10)) + rig.smsTo(frNumber("bouygues", 11))).to.equal(0);
    expect(await c.balanceMicros()).to.equal(start - 10 * PRICE);
    const recorded = await decisions(rig, c.uuid);
    expect(recorded.map((d) => [d.api, d.action, d.rule])).to.deep.equal([
      ["v1", "block", "destination_surge"],
      ["v2", "block", "destination_surge"],
    ]);
    expect(recorded[0]).to.include({ country: "FR", network: "208-20", prefix: "+336600" });
    expect(recorded[0]?.phone_number).to.equal("+3366001**00");
    // The narrowest destination that explains the surge: its one prefix (docs/fraud.md#narrowest-destination).
    expect(recorded[0]?.detail).to.equal(
      "prefix +336600: 10 sent, 0 verified in the last 3600 s; allowed 10",
    );
  });

  it("gives FRAUD_CONVERSION_CREDIT (2) more sends for each right code: V1 valid and V2 success", async function () {
    this.timeout(30_000);
    const c = await rig.account("Credit");
    const sent = await unconverted(c, "bouygues", 1000, 9);
    const v2Phone = frNumber("bouygues", 1009);
    expect((await c.v2Create(v2Phone)).body.status).to.equal("success");
    expect((await c.v1Send(frNumber("bouygues", 1010))).body.status).to.equal("spam_detected");

    const first = sent[0];
    if (first === undefined) throw new Error("no send");
    expect((await c.v1Check(first.auth, await rig.codeTo(first.phone))).body.status).to.equal("valid");
    await unconverted(c, "bouygues", 1011, 2);
    expect((await c.v1Send(frNumber("bouygues", 1013))).body.status).to.equal("spam_detected");

    const checked = await c.v2Check(v2Phone, await rig.codeTo(v2Phone));
    expect(checked.body.status).to.equal("success");
    await unconverted(c, "bouygues", 1014, 2);
    expect((await c.v2Create(frNumber("bouygues", 1016))).body.status).to.equal("blocked");
  });

  it("counts V1 feedback onboarded as a conversion, and not_onboarded as none", async function () {
    this.timeout(30_000);
    const c = await rig.account("Feedback");
    const sent = await unconverted(c, "bouygues", 2000, 10);
    expect((await c.v1Send(frNumber("bouygues", 2010))).body.status).to.equal("spam_detected");
    expect((await c.v1Feedback(sent[0]?.phone ?? "", "not_onboarded")).status).to.equal(200);
    expect((await c.v1Send(frNumber("bouygues", 2011))).body.status).to.equal("spam_detected");
    expect((await c.v1Feedback(sent[1]?.phone ?? "", "onboarded")).status).to.equal(200);
    await unconverted(c, "bouygues", 2012, 2);
    expect((await c.v1Send(frNumber("bouygues", 2014))).body.status).to.equal("spam_detected");
  });

  it("judges retries like first sends: V1 retry answers rate_limited (the SDKs know no spam answer to a retry), V2 create on a running verification blocked suspicious, once each", async function () {
    this.timeout(30_000);
    const c = await rig.account("Retries");
    const sent = await unconverted(c, "bouygues", 3000, 9);
    const v2Phone = frNumber("bouygues", 3009);
    const created = await c.v2Create(v2Phone);
    expect(created.body.status).to.equal("success");
    const balance = await c.balanceMicros();
    const smsBefore = rig.sms.messages.length;
    const metricsBefore = await rig.metrics();

    const first = sent[0];
    if (first === undefined) throw new Error("no send");
    const retried = await c.v1Retry(first.auth);
    expect(retried.status).to.equal(200);
    expect(retried.body.status).to.equal("rate_limited");
    expect(retried.body.remaining_retry).to.equal(3);

    const again = await c.v2Create(v2Phone);
    expect(again.status).to.equal(200);
    expect(again.body).to.include({ id: created.body.id, status: "blocked", reason: "suspicious" });

    expect(rig.sms.messages.length).to.equal(smsBefore);
    expect(await c.balanceMicros()).to.equal(balance);
    // One decision per refused request: the V2 retry is not judged a second time as a new send.
    const recorded = await decisions(rig, c.uuid);
    expect(recorded.map((d) => [d.api, d.rule])).to.deep.equal([
      ["v1", "destination_surge"],
      ["v2", "destination_surge"],
    ]);
    const metricsAfter = await rig.metrics();
    const blocks = (api: string, text: string) =>
      sample(text, "ringfence_fraud_decisions_total", { api, action: "block", rule: "destination_surge" });
    expect(blocks("v2", metricsAfter) - blocks("v2", metricsBefore)).to.equal(1);

    // A right code earns the retry its place; the old code of a retried V2 verification still works.
    expect((await c.v2Check(v2Phone, await rig.codeTo(v2Phone))).body.status).to.equal("success");
    const approved = await c.v1Retry(first.auth);
    expect(approved.body.status).to.equal("approved");
    expect(await rig.codeTo(first.phone, 1)).to.match(/^\d+$/);
  });

  it("blocks a surge on one network while another network of the same country keeps sending", async function () {
    this.timeout(60_000);
    const c = await rig.account("Network surge");
    // The tenant serves France on Orange, its users entering their codes: the country's bound
    // grows with them (10 + 2 × 10).
    for (let i = 0; i < 10; i++) await c.v1Converting(frNumber("orange", i));
    // A pump on SFR, one number per prefix so that only the network and the country add up.
    const pumped = [];
    for (let i = 0; i < 15; i++) pumped.push((await c.v1Send(frNumber("sfr", i * 100))).body.status);
    expect(pumped).to.deep.equal([
      ...Array<string>(10).fill("pending"),
      ...Array<string>(5).fill("spam_detected"),
    ]);
    const recorded = await decisions(rig, c.uuid);
    expect(recorded.map((d) => d.detail)).to.have.length(5);
    for (const d of recorded) {
      expect(d.rule).to.equal("destination_surge");
      expect(d.detail).to.match(/^network 208-09: 10 sent, 0 verified/);
    }
    // Orange and Bouygues users of France still get their codes.
    expect((await c.v1Send(frNumber("orange", 10))).body.status).to.equal("pending");
    expect((await c.v2Create(frNumber("bouygues", 4000))).body.status).to.equal("success");
  });

  it("counts decisions, sends and conversions in /metrics by api, action, rule and country", async function () {
    this.timeout(30_000);
    const c = await rig.account("Metrics");
    const before = await rig.metrics();
    const sent = await unconverted(c, "bouygues", 5000, 9);
    const v2Phone = frNumber("bouygues", 5009);
    expect((await c.v2Create(v2Phone)).body.status).to.equal("success");
    expect((await c.v1Send(frNumber("bouygues", 5010))).body.status).to.equal("spam_detected");
    expect((await c.v1Send(frNumber("bouygues", 5011))).body.status).to.equal("spam_detected");
    expect((await c.v2Create(frNumber("bouygues", 5012))).body.status).to.equal("blocked");
    const first = sent[0];
    if (first === undefined) throw new Error("no send");
    expect((await c.v1Check(first.auth, await rig.codeTo(first.phone))).body.status).to.equal("valid");
    expect((await c.v2Check(v2Phone, await rig.codeTo(v2Phone))).body.status).to.equal("success");
    const after = await rig.metrics();
    const delta = (name: string, labels: Record<string, string>) =>
      sample(after, name, labels) - sample(before, name, labels);
    const decided = "ringfence_fraud_decisions_total";
    expect(delta(decided, { api: "v1", action: "allow", rule: "none" })).to.equal(9);
    expect(delta(decided, { api: "v2", action: "allow", rule: "none" })).to.equal(1);
    expect(delta(decided, { api: "v1", action: "block", rule: "destination_surge" })).to.equal(2);
    expect(delta(decided, { api: "v2", action: "block", rule: "destination_surge" })).to.equal(1);
    expect(delta("ringfence_verifications_sent_total", { api: "v1", country: "FR" })).to.equal(9);
    expect(delta("ringfence_verifications_sent_total", { api: "v2", country: "FR" })).to.equal(1);
    expect(delta("ringfence_verifications_verified_total", { api: "v1", country: "FR" })).to.equal(1);
    expect(delta("ringfence_verifications_verified_total", { api: "v2", country: "FR" })).to.equal(1);
  });

  it("names every rule and action of the engine in a decision or metric of these tests", () => {
    // geo and would_block: test/fraud/judge.test.ts; new_destination_budget:
    // test/fraud/second-pass.test.ts; source_fanout: test/fraud/sources.test.ts; the others above
    // and in conversion_drop below.
    expect([...FRAUD_RULES]).to.deep.equal([
      "none",
      "geo",
      "destination_surge",
      "conversion_drop",
      "new_destination_budget",
      "source_fanout",
    ]);
    expect(FRAUD_ACTIONS).to.include.members(["allow", "block", "would_block"]);
  });
});

describe("fraud engine: conversion_drop over REST", () => {
  let rig: FraudRig;
  before(async function () {
    this.timeout(30_000);
    // Time compressed: a 60 s window (slices of 5 s), no grace, judged after 4 sends; the surge
    // bound and the new-destination budget out of the way (100) so that only the conversion decides.
    rig = await FraudRig.start({
      FRAUD_WINDOW_SECONDS: "60",
      FRAUD_GRACE_SECONDS: "0",
      FRAUD_CONVERSION_MIN_SENDS: "4",
      FRAUD_NEW_DESTINATION_SENDS: "100",
      FRAUD_NEW_DESTINATION_BUDGET: "100",
    });
  });
  after(async () => rig.stop());

  it("blocks a network whose codes are not entered once its sends are past the grace, while the tenant's converting network keeps sending", async function () {
    this.timeout(60_000);
    const c = await rig.account("Slow pump");
    for (let i = 0; i < 6; i++) await c.v1Converting(frNumber("orange", i));
    await unconverted(c, "sfr", 0, 4);
    // Each probe is one more unconverted SFR send, until the slices of the first four have ended.
    let n = 4;
    let last = "";
    await waitFor(async () => {
      last = String((await c.v1Send(frNumber("sfr", n++ * 100))).body.status);
      return last === "spam_detected";
    }, 20_000);
    const recorded = await decisions(rig, c.uuid);
    expect(recorded).to.have.length(1);
    expect(recorded[0]).to.include({
      api: "v1",
      action: "block",
      rule: "conversion_drop",
      network: "208-09",
    });
    expect(recorded[0]?.detail).to.match(
      /^network 208-09: conversion 0\.00 over \d+ sends, the tenant converts 0\.\d\d$/,
    );
    expect((await c.v1Send(frNumber("orange", 6))).body.status).to.equal("pending");
  });
});
