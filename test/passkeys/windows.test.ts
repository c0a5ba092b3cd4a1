import { expect } from "chai";
import {
  LOGINS,
  ORIGIN,
  PASSWORD,
  PasskeyRig,
  RP_ID,
  withField,
  type Answer,
  type PasskeyUser,
} from "../support/passkeys.js";
import { keysAddedSince, keysUnder } from "../support/redis.js";
import { SoftAuthenticator } from "../support/webauthn.js";

/**
 * The passkey login in the password login's failure windows (docs/session-api.md#passkeys,
 * #password-login, #known-sources): each attempt takes a place in the window of every identifier
 * of the credential's user and in the address's, gives it back on success, and a full window
 * refuses every attempt. Clients of other networks call from other /24s of the loopback network.
 */

/** Where the users' sessions were opened: a known source of their identifiers. */
const HOME = "127.0.5.1";
const REFUSALS = "ringfence_abuse_refusals_total";

function expectWindowRefusal(r: Answer, windowSeconds: number, what: string): void {
  expect(r.status, `${what}: ${JSON.stringify(r.body)}`).to.equal(429);
  expect(r.body.code, what).to.equal("too_many_attempts");
  expect(Number(r.retryAfter), `${what}: Retry-After`).to.be.within(1, windowSeconds);
}

function expectStatus(r: Answer, status: number, what: string): void {
  expect(r.status, `${what}: ${JSON.stringify(r.body)}`).to.equal(status);
}

/** A failed attempt of the user's own passkey: a wrong origin (counted, refused 401). */
async function fail(rig: PasskeyRig, u: PasskeyUser, from: string, what = "a failure"): Promise<void> {
  const r = await rig.login(u.appId, (o) => u.auth.get(o, { origin: "https://evil.example.org" }), from);
  expectStatus(r, 401, `${what} from ${from}`);
}

/** Bad input of every kind a login refuses 400: it takes no place. */
async function badInputs(rig: PasskeyRig, u: PasskeyUser, from: string): Promise<void> {
  const { challenge_token, options } = await rig.loginOptions(u.appId);
  const good = u.auth.get(options, { origin: ORIGIN });
  for (const [token, credential] of [
    [undefined, good],
    ["pl_garbage", good],
    ["xyz", good],
    [challenge_token, withField(good, "response.signature", undefined)],
    [challenge_token, withField(good, "type", "other")],
  ] as const) {
    expectStatus(await rig.loginAnswer(token, credential, from), 400, `bad input from ${from}`);
  }
}

describe("passkey login in the failure windows (docs/session-api.md#passkeys)", () => {
  describe("PASSWORD_FAILURES_IDENTIFIER 3/900 (the address's off)", () => {
    let rig: PasskeyRig;
    let appId: string;
    before(async () => {
      rig = await PasskeyRig.start({ PASSWORD_FAILURES_IDENTIFIER: "3/900", PASSWORD_FAILURES_IP: "off" });
      ({ appId } = await rig.newApp());
    });
    after(async () => {
      await rig.stop();
    });

    /** A user with an email and a phone, its session opened from HOME, holding one passkey. */
    async function user(): Promise<PasskeyUser> {
      const u = await rig.user(appId, { phone: true, from: HOME });
      await rig.register(u);
      return u;
    }

    it("counts failures in the window of every identifier of the credential's user: once full, the right passkey and the right password are 429 too_many_attempts with Retry-After", async () => {
      const u = await user();
      const stranger = "127.0.1.9";
      const m = await rig.meter();
      for (let i = 0; i < 3; i++) await fail(rig, u, stranger, `failure ${i + 1}`);
      // A refused attempt writes nothing, its challenge included: strangers past the window fill no Redis.
      const keys = await keysUnder(rig.app.registry.redis, rig.app.config.REDIS_KEY_PREFIX);
      expectWindowRefusal(await rig.loginAs(u, { from: stranger }), 900, "the right passkey");
      expect(
        await keysAddedSince(rig.app.registry.redis, rig.app.config.REDIS_KEY_PREFIX, keys),
      ).to.deep.equal([]);
      expectWindowRefusal(await rig.loginAs(u, { from: "127.0.2.9" }), 900, "the right passkey, elsewhere");
      expect(await m.grew(LOGINS, { use: "login", outcome: "invalid_credentials" })).to.equal(3);
      expect(await m.grew(LOGINS, { use: "login", outcome: "too_many_attempts" })).to.equal(2);
      expect(await m.grew(LOGINS, { use: "login", outcome: "success" })).to.equal(0);
      expect(await m.grew(REFUSALS, { rule: "PASSWORD_FAILURES_IDENTIFIER" })).to.equal(2);

      // The windows are the password login's, one per identifier of the user.
      for (const identifier of [
        { type: "email_address", value: u.email },
        { type: "phone_number", value: u.phone ?? "" },
      ]) {
        const r = await rig.call("POST", "/v1/session/login/password", {
          body: { app_id: appId, identifier, password: PASSWORD },
          from: "127.0.2.9",
        });
        expectWindowRefusal(r, 900, `the right password of ${identifier.type}`);
      }
      // Another user of the app meets its own windows.
      const other = await user();
      expectStatus(await rig.loginAs(other, { from: stranger }), 200, "another user");
    });

    it("lets the user log in from its known source whatever strangers failed, and stops a known source at its own window", async () => {
      // One identifier, whose session opened from HOME: HOME is a known source of all it holds.
      const u = await rig.user(appId, { from: HOME });
      await rig.register(u);
      for (let i = 0; i < 3; i++) await fail(rig, u, "127.0.3.9", `a stranger's failure ${i + 1}`);
      expectWindowRefusal(await rig.loginAs(u, { from: "127.0.3.9" }), 900, "the stranger");
      expectStatus(await rig.loginAs(u, { from: HOME }), 200, "the user at home");
      expectStatus(await rig.loginAs(u, { from: "127.0.5.77" }), 200, "a neighbour address of home");
      // Home's own window: its failures, not the strangers'.
      for (let i = 0; i < 3; i++) await fail(rig, u, HOME, `home's failure ${i + 1}`);
      expectWindowRefusal(await rig.loginAs(u, { from: HOME }), 900, "home after its own 3 failures");
    });

    it("takes a network known for one identifier of the user as known for all: strangers filling the phone's window do not stop the user at home", async () => {
      // The session opened by the email's password from HOME: HOME is a known source of the email only.
      const u = await user();
      for (let i = 0; i < 3; i++) await fail(rig, u, "127.0.3.19", `a stranger's failure ${i + 1}`);
      expectWindowRefusal(await rig.loginAs(u, { from: "127.0.3.19" }), 900, "the stranger");
      expectStatus(await rig.loginAs(u, { from: HOME }), 200, "the user at home");
    });

    it("makes the network of a completed passkey login a known source", async () => {
      const u = await user();
      const travel = "127.0.7.1";
      expectStatus(await rig.loginAs(u, { from: travel }), 200, "the first passkey login from there");
      for (let i = 0; i < 3; i++) await fail(rig, u, "127.0.4.9", `a stranger's failure ${i + 1}`);
      expectWindowRefusal(await rig.loginAs(u, { from: "127.0.4.9" }), 900, "the stranger");
      expectStatus(await rig.loginAs(u, { from: travel }), 200, "the user from there");
    });

    it("gives a success's place back: 2 failures, a success, and the window still takes 1 more failure", async () => {
      const u = await user();
      const stranger = "127.0.6.9";
      await fail(rig, u, stranger, "failure 1");
      await fail(rig, u, stranger, "failure 2");
      // A success from a stranger's network takes its place in the identifier's window, then frees it.
      expectStatus(await rig.loginAs(u, { from: "127.0.8.1" }), 200, "a success");
      await fail(rig, u, stranger, "failure 3");
      expectWindowRefusal(await rig.loginAs(u, { from: stranger }), 900, "after the third failure");
    });

    it("takes no place for bad input, nor in an identifier's window for a credential nobody holds", async () => {
      const u = await user();
      const stranger = "127.0.9.9";
      await badInputs(rig, u, stranger);
      const unknown = new SoftAuthenticator();
      unknown.create({ challenge: "AAAA", rp: { id: RP_ID }, user: { id: "dXNy" } }, { origin: ORIGIN });
      for (let i = 0; i < 4; i++) {
        expectStatus(
          await rig.login(appId, (o) => unknown.get(o, { origin: ORIGIN }), stranger),
          401,
          "unknown",
        );
      }
      await fail(rig, u, stranger, "failure 1");
      await fail(rig, u, stranger, "failure 2");
      expectStatus(await rig.loginAs(u, { from: stranger }), 200, "the right passkey after 2 failures");
      await fail(rig, u, "127.0.10.9", "failure 3");
      expectWindowRefusal(await rig.loginAs(u, { from: "127.0.10.9" }), 900, "after 3 failures");
    });
  });

  describe("PASSWORD_FAILURES_IP 3/300 (the identifiers' off)", () => {
    let rig: PasskeyRig;
    before(async () => {
      rig = await PasskeyRig.start({ PASSWORD_FAILURES_IDENTIFIER: "off", PASSWORD_FAILURES_IP: "3/300" });
    });
    after(async () => {
      await rig.stop();
    });

    it("counts every failure from an address, unknown credentials included, across users and apps; gives a success's place back; takes none for bad input; a full window refuses the right passkey and password", async () => {
      const a = await rig.newApp();
      const b = await rig.newApp();
      const u = await rig.user(a.appId);
      await rig.register(u);
      const v = await rig.user(b.appId);
      await rig.register(v);
      const address = "127.0.11.1";
      const m = await rig.meter();

      await badInputs(rig, u, address);
      const unknown = new SoftAuthenticator();
      unknown.create({ challenge: "AAAA", rp: { id: RP_ID }, user: { id: "dXNy" } }, { origin: ORIGIN });
      expectStatus(
        await rig.login(a.appId, (o) => unknown.get(o, { origin: ORIGIN }), address),
        401,
        "unknown",
      );
      await fail(rig, u, address, "failure 2");
      expectStatus(await rig.loginAs(u, { from: address }), 200, "a success gives its place back");
      await fail(rig, v, address, "failure 3, another app's user");

      expectWindowRefusal(await rig.loginAs(u, { from: address }), 300, "the right passkey");
      expectWindowRefusal(await rig.loginAs(v, { from: address }), 300, "the right passkey of app B");
      const password = await rig.call("POST", "/v1/session/login/password", {
        body: { app_id: a.appId, identifier: { type: "email_address", value: u.email }, password: PASSWORD },
        from: address,
      });
      expectWindowRefusal(password, 300, "the right password");
      expect(await m.grew(REFUSALS, { rule: "PASSWORD_FAILURES_IP" })).to.equal(3);
      expect(await m.grew(LOGINS, { use: "login", outcome: "too_many_attempts" })).to.equal(2);
      expect(await m.grew(LOGINS, { use: "login", outcome: "invalid_credentials" })).to.equal(3);

      // Another address meets its own window.
      expectStatus(await rig.loginAs(u, { from: "127.0.12.1" }), 200, "another address");
    });
  });
});
