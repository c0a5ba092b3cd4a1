import { expect } from "chai";
import { fraudScenario, type TrafficRecord } from "../support/fraud-scenario.js";
import { FraudRig, type Customer } from "../support/fraud.js";
import { SmsReceiver } from "../support/receivers.js";
import { waitFor } from "../support/redis.js";

const PRICE = 50_000;

interface Outcome {
  record: TrafficRecord;
  /** Seconds after the scenario's start. */
  s: number;
  sent: boolean;
  status: number;
}

/**
 * The "Done when", over REST against the real service: a tenant's converting legitimate
 * traffic (V1 and V2, FR, DE, GB and ES mobiles, most codes entered 2 to 8 s after the send, 15%
 * abandoned) and, in its middle, a pumping attack on LV (a country the tenant never served) and on
 * FR Lycamobile (208-25, a network of a country it serves), every attack send from its own IP and
 * device. Each record is played at its time in the scenario.
 *
 * Time is compressed by rates rather than by a long run: the scenario lasts 55 s (legitimate
 * traffic at 240 sends a minute, ramped over 10 s) and the attack 20 s from the 30th second, at
 * 450 sends a minute on each target (300 attack sends). The engine's window stays at its default
 * (an hour): in a real attack the same bounds (10 sends per new destination, 2 per conversion)
 * meet a lower rate over a longer time, so the share of attack sends that get through only falls.
 */
describe("fraud engine: a pumping attack amid converting traffic, over REST (the issue's Done when)", () => {
  let rig: FraudRig;
  let c: Customer;
  before(async function () {
    this.timeout(30_000);
    rig = await FraudRig.start({});
    c = await rig.account("Scenario");
  });
  after(async () => rig.stop());

  it("sends at most 10% of attack sends and refuses at most 2% of legitimate sends during the attack, with no 5xx, charging exactly the messages sent", async function () {
    this.timeout(150_000);
    const attackStartS = 30;
    const attackDurationS = 20;
    const records = fraudScenario({
      seed: 7,
      start: new Date().toISOString(),
      tenant: c.uuid,
      durationS: 55,
      rampS: 10,
      legitPerMinute: 240,
      attackStartS,
      attackDurationS,
      newCountryPerMinute: 450,
      networkPerMinute: 450,
    });
    const balanceBefore = await c.balanceMicros();

    // The codes as they arrive, by number (every number of the scenario is drawn once).
    const codes = new Map<string, string>();
    let read = 0;
    const codeOf = async (phone: string): Promise<string> => {
      await waitFor(async () => {
        const all = rig.sms.messages;
        for (; read < all.length; read++) {
          const m = all[read];
          if (m !== undefined) codes.set(m.to, SmsReceiver.code(m));
        }
        return Promise.resolve(codes.has(phone));
      });
      return codes.get(phone) ?? "";
    };

    const t0 = Date.now();
    const startMs = Date.parse(records[0]?.at ?? "") - 0;
    const scenarioStart = Date.parse(new Date(t0).toISOString());
    const until = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms - Date.now())));
    const problems: string[] = [];

    const play = async (r: TrafficRecord): Promise<Outcome> => {
      const atMs = Date.parse(r.at);
      await until(scenarioStart + (atMs - startMs));
      const s = (atMs - Date.parse(records[0]?.at ?? "")) / 1000;
      const signals = { ip: r.ip, device_id: r.device_id };
      const answer =
        r.api === "v1" ? await c.v1Send(r.phone_number, signals) : await c.v2Create(r.phone_number, signals);
      const sent = r.api === "v1" ? answer.body.status === "pending" : answer.body.status === "success";
      if (sent && r.verified_after_s !== null) {
        const code = await codeOf(r.phone_number);
        await until(atMs - startMs + scenarioStart + r.verified_after_s * 1000);
        const checked =
          r.api === "v1"
            ? await c.v1Check(String(answer.body.authentication_uuid), code)
            : await c.v2Check(r.phone_number, code);
        const ok = r.api === "v1" ? "valid" : "success";
        if (checked.body.status !== ok) problems.push(`check of ${r.phone_number}: ${checked.text}`);
        if (checked.status >= 500) problems.push(`check ${checked.status}`);
      }
      return { record: r, s, sent, status: answer.status };
    };
    const outcomes = await Promise.all(records.map(play));

    expect(problems).to.deep.equal([]);
    expect(outcomes.filter((o) => o.status >= 500)).to.deep.equal([]);
    const attack = outcomes.filter((o) => o.record.label === "fraud");
    const legit = outcomes.filter((o) => o.record.label === "legit");
    const during = legit.filter((o) => o.s >= attackStartS && o.s < attackStartS + attackDurationS);
    const attackSent = attack.filter((o) => o.sent).length;
    const legitRefused = during.filter((o) => !o.sent).length;
    const summary = {
      attack: attack.length,
      attackSent,
      legit: legit.length,
      legitRefused: legit.filter((o) => !o.sent).length,
      legitDuring: during.length,
      legitRefusedDuring: legitRefused,
      seconds: (Date.now() - t0) / 1000,
      refused: legit.filter((o) => !o.sent).map((o) => `${o.record.api} ${o.record.phone_number} at ${o.s}s`),
    };
    expect(attack.length, JSON.stringify(summary)).to.be.greaterThan(250);
    expect(attackSent / attack.length, JSON.stringify(summary)).to.be.at.most(0.1);
    expect(legitRefused / during.length, JSON.stringify(summary)).to.be.at.most(0.02);

    // Every message the provider took was charged, and nothing else.
    const delivered = rig.sms.messages.length;
    expect(delivered).to.equal(outcomes.filter((o) => o.sent).length);
    expect(balanceBefore - (await c.balanceMicros())).to.equal(PRICE * delivered);
  });
});
