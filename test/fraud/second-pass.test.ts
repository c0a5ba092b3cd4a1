import { expect } from "chai";
import { Customer, FR_NETWORKS, FraudRig, frNumber } from "../support/fraud.js";
import { countriesWith, mobiles } from "../support/phones.js";
import { callFrom } from "../support/rest.js";
import { cliEnv, runCli } from "../support/app.js";

/** A user's own address, from its number (hard windows per address stay out of the way). */
function userAddress(phone: string): string {
  const n = Number(phone.slice(-6));
  return `203.0.${(n >> 8) & 255}.${n & 255}`;
}

/** A V2 send and its code entered right (a converting user, from its own address): whether it was sent. */
async function converting(rig: FraudRig, c: Customer, phone: string): Promise<boolean> {
  const before = rig.smsTo(phone);
  const created = await c.v2Create(phone, { ip: userAddress(phone) });
  expect(created.status, created.text).to.equal(200);
  if (created.body.status === "blocked") return false;
  const checked = await c.v2Check(phone, await rig.codeTo(phone, before));
  expect(checked.body.status, checked.text).to.equal("success");
  return true;
}

/** Issue 31 (decisions 9.4): the pumping an attacker who read docs/fraud.md would run, over REST. */
describe("fraud engine, second pass: new-destination budget, credit per number, returning users", () => {
  let rig: FraudRig;
  before(async function () {
    this.timeout(30_000);
    // The documented defaults; no share of the busiest day, so that each converting number earns
    // exactly FRAUD_CONVERSION_CREDIT sends.
    rig = await FraudRig.start({ FRAUD_BASELINE_SHARE: "0", OTP_RETRY_INTERVAL_SECONDS: "0" });
  });
  after(async () => rig.stop());

  it("gives 60 never-served countries x 12 sends, each from its own address and device, at most FRAUD_NEW_DESTINATION_BUDGET (30) together, while converting users in served countries all get their codes", async function () {
    this.timeout(300_000);
    const c = await rig.account("Fan-out");
    const served = ["FR", "DE", "ES"];
    // Converting users in three countries first: they are served (a conversion today).
    const legit = Object.fromEntries(served.map((cc) => [cc, mobiles(cc, 40) ?? []]));
    let legitSent = 0;
    let legitRefused = 0;
    const legitUser = async (cc: string, i: number) => {
      const phone = legit[cc]?.[i];
      if (phone === undefined) throw new Error(`no number ${cc} ${i}`);
      if (await converting(rig, c, phone)) legitSent++;
      else legitRefused++;
    };
    for (let i = 0; i < 3; i++) for (const cc of served) await legitUser(cc, i);

    const attacked = countriesWith(12, 50, served).slice(0, 60);
    expect(attacked).to.have.length(60);
    let attack = 0;
    let attackSent = 0;
    let legitTurn = 3;
    for (let round = 0; round < 12; round++) {
      for (const numbers of attacked) {
        const phone = numbers[round] ?? "";
        // Each from an address of its own /24: no source explains the traffic.
        const res = await c.v2Create(phone, {
          ip: `${11 + (attack % 200)}.${attack >> 8}.${attack & 255}.7`,
          device_id: `device-${attack}`,
        });
        expect(res.status, res.text).to.equal(200);
        attack++;
        if (res.body.status !== "blocked") attackSent++;
        // Real users keep coming: one in each served country every 30 attack sends.
        if (attack % 30 === 0 && legitTurn < 40) {
          for (const cc of served) await legitUser(cc, legitTurn);
          legitTurn++;
        }
      }
    }
    console.log(
      `      attack: ${attackSent} of ${attack} sent; legitimate: ${legitSent} sent, ${legitRefused} refused`,
    );
    expect(attack).to.equal(720);
    // The budget, and each new country's first sends before it: at most 10% of the attack.
    expect(attackSent).to.be.at.most(30);
    expect(attackSent).to.be.at.most(attack * 0.1);
    expect(legitRefused).to.equal(0);
    expect(legitSent).to.be.at.least(60);
    const recorded = await rig.rulesRecorded(c.uuid);
    expect(recorded).to.have.length(attack - attackSent);
    // The budget refuses them; each country's sends go to one prefix, which its refused sends keep
    // at its bound, so later ones there are refused as destination_surge (docs/fraud.md#how-it-decides).
    expect(recorded).to.include("block new_destination_budget");
    for (const rule of new Set(recorded)) {
      expect(["block new_destination_budget", "block destination_surge"]).to.include(rule);
    }
  });

  it("gives 150 pumped sends into one range of a served country its first 10, while the country's real users, on that network too, all get their codes", async function () {
    this.timeout(300_000);
    const c = await rig.account("Served country");
    const networks = ["sfr", "bouygues", "orange"] as const;
    // Real users: France on its three networks, each in a range of its own (+3361 5xxx: not the
    // pumped +336123), Germany and Spain.
    const fr = (i: number) =>
      `+336${FR_NETWORKS[networks[i % 3] ?? "sfr"].digit}5${String(i).padStart(3, "0")}${String((i * 37) % 1000).padStart(3, "0")}`;
    const others = { DE: mobiles("DE", 40) ?? [], ES: mobiles("ES", 40) ?? [] };
    let legitSent = 0;
    let legitRefused = 0;
    let turn = 0;
    const realUsers = async () => {
      for (const phone of [fr(turn), others.DE[turn] ?? "", others.ES[turn] ?? ""]) {
        if (await converting(rig, c, phone)) legitSent++;
        else legitRefused++;
      }
      turn++;
    };
    for (let i = 0; i < 3; i++) await realUsers();
    // The pump: one range of SFR (+336123, 100,000 numbers), each send from its own /24 and device.
    let pumpSent = 0;
    for (let n = 0; n < 150; n++) {
      const phone = `+336123${String((n * 6_173 + 1_234) % 100_000).padStart(5, "0")}`;
      const res = await c.v2Create(phone, {
        ip: `${11 + (n % 200)}.${n >> 8}.${n & 255}.9`,
        device_id: `pump-${n}`,
      });
      expect(res.status, res.text).to.equal(200);
      if (res.body.status !== "blocked") pumpSent++;
      if (n % 5 === 4 && turn < 33) await realUsers();
    }
    console.log(
      `      pump: ${pumpSent} of 150 sent; real users: ${legitSent} sent, ${legitRefused} refused`,
    );
    expect(pumpSent).to.equal(10);
    expect(legitRefused).to.equal(0);
    expect(legitSent).to.equal(99);
    // Only the range is named: never France, nor SFR, whose users were served throughout.
    const { redis, fraud } = rig.app.registry;
    const details = (await redis.xrange(fraud.keys.decisions(c.uuid), "-", "+")).map(
      ([, f]) => `${f[f.indexOf("rule") + 1]} ${f[f.indexOf("detail") + 1]}`,
    );
    expect(details).to.have.length(140);
    for (const d of details) expect(d).to.match(/^destination_surge prefix \+336123: 10 sent, 0 verified/);
  });

  it("earns credit once per converting number: four numbers entering five codes each earn what four codes do", async function () {
    this.timeout(120_000);
    const c = await rig.account("Re-entered codes");
    // Four numbers of the attacker's, each entering five codes.
    for (let n = 0; n < 4; n++) {
      for (let k = 0; k < 5; k++) expect(await converting(rig, c, frNumber("orange", n))).to.equal(true);
    }
    // Then pumping to numbers nobody enters, in the same country: 10 + 2 x 4 sends in the window,
    // the 20 sends to the owned numbers included; 20 conversions would have allowed 10 + 2 x 20.
    let pumped = 0;
    for (let i = 100; i < 150; i++) {
      const res = await c.v2Create(frNumber("orange", i));
      if (res.body.status !== "blocked") pumped++;
    }
    expect(pumped).to.equal(0);
    expect(new Set(await rig.rulesRecorded(c.uuid))).to.deep.equal(new Set(["block destination_surge"]));
  });

  it("never refuses a returning user by an adaptive rule: a number that converted gets its code while its destination is blocked, and a geo block still holds it", async function () {
    this.timeout(120_000);
    const c = await rig.account("Returning users");
    const user = frNumber("bouygues", 0);
    expect(await converting(rig, c, user)).to.equal(true);
    // Strangers' sends nobody enters fill the destination (10 + 2 for the one conversion).
    for (let i = 1; i <= 11; i++) {
      expect((await c.v2Create(frNumber("bouygues", i))).body.status, `send ${i}`).to.equal("success");
    }
    expect((await c.v2Create(frNumber("bouygues", 12))).body.status).to.equal("blocked");
    // The user comes back: V2 and V1 both send.
    expect(await converting(rig, c, user)).to.equal(true);
    const v1 = await c.v1Send(user);
    expect(v1.body.status, v1.text).to.equal("pending");
    expect((await c.v2Create(frNumber("bouygues", 13))).body.status).to.equal("blocked");
    // A geo block is the tenant's own choice: it holds returning users too.
    await rig.app.registry.redis.hset(rig.app.registry.fraud.keys.policy(c.uuid), "g:FR", "block");
    expect((await c.v2Create(user)).body.status).to.equal("blocked");
    expect(await rig.rulesRecorded(c.uuid)).to.deep.equal([
      "block destination_surge",
      "block destination_surge",
      "block geo",
    ]);
  });

  it("records would_block new_destination_budget in shadow mode and sends", async function () {
    this.timeout(120_000);
    const c = await rig.account("Shadow budget");
    await rig.app.registry.redis.hset(rig.app.registry.fraud.keys.policy(c.uuid), "mode", "shadow");
    const countries = countriesWith(1, 80).slice(0, 32);
    let sent = 0;
    for (const numbers of countries) {
      if ((await c.v2Create(numbers[0] ?? "")).body.status !== "blocked") sent++;
    }
    expect(sent).to.equal(32);
    expect(await rig.rulesRecorded(c.uuid)).to.deep.equal([
      "would_block new_destination_budget",
      "would_block new_destination_budget",
    ]);
  });

  it("gives the public login endpoint's pumping, 60 countries x 10 from 70 addresses, at most the budget, while the app's users in France log in", async function () {
    this.timeout(300_000);
    const made = await runCli(["apps", "create", "--name", "Public login"], cliEnv(rig.app.config));
    const appId = String((JSON.parse(made.stdout) as Record<string, string>).app_id);
    const login = (phone: string, from: string) =>
      callFrom(from, `${rig.app.baseUrl}/v1/session/login/otp`, "POST", {
        app_id: appId,
        identifier: { type: "phone_number", value: phone },
      });
    const users = mobiles("FR", 30) ?? [];
    let usersServed = 0;
    const userLogin = async (i: number) => {
      const phone = users[i] ?? "";
      const before = rig.smsTo(phone);
      const started = await login(phone, `127.200.${i}.1`);
      if (started.status !== 200) return;
      const done = await callFrom(`127.200.${i}.1`, `${rig.app.baseUrl}/v1/session/login/otp/check`, "POST", {
        challenge_token: started.body.challenge_token,
        code: await rig.codeTo(phone, before),
      });
      expect(done.status, JSON.stringify(done.body)).to.equal(200);
      usersServed++;
    };
    for (let i = 0; i < 5; i++) await userLogin(i);
    // Then one user every 24 pumped codes: 25 more.
    const countries = countriesWith(10, 60, ["FR"]).slice(0, 60);
    let attack = 0;
    let delivered = 0;
    for (let round = 0; round < 10; round++) {
      for (const numbers of countries) {
        // 70 addresses of 70 networks, none past LOGIN_LIMIT_IP (10 an hour).
        const from = `127.${10 + (attack % 70)}.0.1`;
        const r = await login(numbers[round] ?? "", from);
        expect([200, 403], JSON.stringify(r.body)).to.include(r.status);
        attack++;
        if (r.status === 200) delivered++;
        if (attack % 24 === 0) await userLogin(4 + attack / 24);
      }
    }
    console.log(
      `      login pumping: ${delivered} of ${attack} sent; the app's users: ${usersServed} of 30 logged in`,
    );
    expect(attack).to.equal(600);
    expect(delivered).to.be.at.most(attack * 0.1);
    expect(usersServed).to.equal(30);
  });
});
