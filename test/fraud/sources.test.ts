import { expect } from "chai";
import { cliEnv, runCli } from "../support/app.js";
import { FraudRig, frNumber } from "../support/fraud.js";
import { mobiles } from "../support/phones.js";
import { callFrom, type Json } from "../support/rest.js";

/** Mobile numbers of four countries, three of each. */
const ABROAD = ["DE", "ES", "IT", "NL"].map((cc) => mobiles(cc, 3) ?? []);

/**
 * Issue 31 (decisions 9.4, rule `source_fanout`): a source (an IPv4 address and its /24, an IPv6
 * /64, a device id) that fans out is refused, and a surge that at most two sources made refuses
 * them, not the destination's other users.
 */
describe("fraud engine: sources (docs/fraud.md#sources)", () => {
  let rig: FraudRig;
  before(async function () {
    this.timeout(30_000);
    // The documented defaults; the static rules on the numbers one address or device reaches, and
    // the device's window, out of the way: the engine's rules are what is tried.
    rig = await FraudRig.start({
      FRAUD_BASELINE_SHARE: "0",
      OTP_RETRY_INTERVAL_SECONDS: "0",
      SPAM_IP_NUMBERS: "off",
      SPAM_DEVICE_NUMBERS: "off",
      RATE_LIMIT_DEVICE: "off",
    });
  });
  after(async () => rig.stop());

  async function newApp(): Promise<string> {
    const made = await runCli(["apps", "create", "--name", "Shop"], cliEnv(rig.app.config));
    return String((JSON.parse(made.stdout) as Record<string, string>).app_id);
  }

  /** A login code asked from `from` (a loopback address of its own: another client). */
  const askCode = (appId: string, phone: string, from: string) =>
    callFrom(from, `${rig.app.baseUrl}/v1/session/login/otp`, "POST", {
      app_id: appId,
      identifier: { type: "phone_number", value: phone },
    });
  const text = (body: Json) => JSON.stringify(body);

  it("refuses the one address whose login codes made a new app's French surge, and keeps sending to the app's other users in France", async function () {
    this.timeout(60_000);
    const appId = await newApp();
    for (let i = 0; i < 10; i++) {
      const r = await askCode(appId, frNumber("bouygues", i), "127.0.51.23");
      expect(r.status, `attack ${i}: ${text(r.body)}`).to.equal(200);
    }
    // FR is at its bound (10 unconverted sends): the attacker's next code is refused, from another
    // address of its /24 too...
    const refused = await askCode(appId, frNumber("bouygues", 10), "127.0.51.24");
    expect(refused.status, text(refused.body)).to.equal(403);
    expect(refused.body.code).to.equal("spam_detected");
    // ...and the app's real users, each from its own address, still get theirs and log in.
    for (let i = 0; i < 8; i++) {
      const user = frNumber("orange", 500 + i);
      const from = `127.1.${i}.10`;
      const r = await askCode(appId, user, from);
      expect(r.status, `user ${i}: ${text(r.body)}`).to.equal(200);
      const done = await callFrom(from, `${rig.app.baseUrl}/v1/session/login/otp/check`, "POST", {
        challenge_token: r.body.challenge_token,
        code: await rig.codeTo(user),
      });
      expect(done.status, text(done.body)).to.equal(200);
    }
    // The attacker's network is still refused.
    expect((await askCode(appId, frNumber("bouygues", 11), "127.0.51.25")).status).to.equal(403);
    expect(await rig.rulesRecorded(appId)).to.deep.equal(["block source_fanout", "block source_fanout"]);
    const detail = await rig.app.registry.redis.xrange(
      rig.app.registry.fraud.keys.decisions(appId),
      "-",
      "+",
    );
    expect(detail[0]?.[1].join(" ")).to.contain("network 127.0.51.0/24 among them");
  });

  it("refuses a source past FRAUD_SOURCE_COUNTRIES (3) countries in a day, not the countries, and not another source", async function () {
    this.timeout(60_000);
    const c = await rig.account("Countries");
    const fan = { ip: "192.0.2.77", device_id: "fan-device" };
    const [de, es, it, nl] = ABROAD as [string[], string[], string[], string[]];
    for (const numbers of [de, es, it])
      expect((await c.v2Create(numbers[0] ?? "", fan)).body.status).to.equal("success");
    // A fourth country from the same address, or from the same device elsewhere: refused.
    expect((await c.v2Create(nl[0] ?? "", fan)).body.status).to.equal("blocked");
    const v1 = await c.v1Send(nl[1] ?? "", { device_id: "fan-device", ip: "198.18.5.5" });
    expect(v1.body.status, v1.text).to.equal("spam_detected");
    // Its three countries still take its codes; another source sends to the fourth.
    expect((await c.v2Create(de[1] ?? "", fan)).body.status).to.equal("success");
    expect((await c.v2Create(nl[2] ?? "", { ip: "192.0.3.9" })).body.status).to.equal("success");
    expect(await rig.rulesRecorded(c.uuid)).to.deep.equal(["block source_fanout", "block source_fanout"]);
  });

  it("refuses a device past FRAUD_SOURCE_SENDS (20) unconverted sends in a day; each right code gives its send back and earns 2 more", async function () {
    this.timeout(60_000);
    const c = await rig.account("Device");
    const device = { device_id: "one-phone" };
    // Spread over networks and ranges so that no destination surges: only the device counts.
    const networks = ["sfr", "bouygues", "orange"] as const;
    const phone = (i: number) => frNumber(networks[i % 3] ?? "sfr", 100 * i + 7);
    // Converting users first (12, each from its own address), so that the country and its
    // networks have room for the device's 20 sends: only the device's own count refuses it.
    for (let i = 40; i < 52; i++) {
      const user = phone(i);
      expect((await c.v2Create(user, { ip: `100.65.${i}.1` })).body.status).to.equal("success");
      expect((await c.v2Check(user, await rig.codeTo(user))).body.status).to.equal("success");
    }
    for (let i = 0; i < 20; i++) {
      const r = await c.v2Create(phone(i), { ...device, ip: `100.64.${i}.1` });
      expect(r.body.status, `send ${i}: ${r.text}`).to.equal("success");
    }
    expect((await c.v2Create(phone(20), { ...device, ip: "100.64.20.1" })).body.status).to.equal("blocked");
    // A right code for one of its sends gives it back and earns FRAUD_CONVERSION_CREDIT (2) more.
    const checked = await c.v2Check(phone(0), await rig.codeTo(phone(0)));
    expect(checked.body.status).to.equal("success");
    for (let i = 21; i < 24; i++) {
      expect((await c.v2Create(phone(i), { ...device, ip: `100.64.${i}.1` })).body.status).to.equal(
        "success",
      );
    }
    expect((await c.v2Create(phone(24), { ...device, ip: "100.64.24.1" })).body.status).to.equal("blocked");
    const recorded = await rig.app.registry.redis.xrange(
      rig.app.registry.fraud.keys.decisions(c.uuid),
      "-",
      "+",
    );
    expect(recorded.map(([, f]) => f[f.indexOf("detail") + 1])).to.deep.equal([
      "device one-phone: 20 unconverted sends today, 0 verified; allowed 20",
      "device one-phone: 22 unconverted sends today, 1 verified; allowed 22",
    ]);
  });
});
