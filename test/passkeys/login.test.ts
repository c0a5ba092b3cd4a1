import { expect } from "chai";
import { randomBytes } from "node:crypto";
import { status } from "@grpc/grpc-js";
import { decodeJwt } from "jose";
import { Secrets } from "../../src/crypto/secrets.js";
import { PasskeyServiceClient } from "../../src/gen/ringfence/session/v1/passkey_service.js";
import { verifyWebhook } from "../../src/webhooks/signature.js";
import { insecure, unary } from "../support/app.js";
import {
  LOGINS,
  ORIGIN,
  PasskeyRig,
  REFUSED,
  RELYING_PARTY,
  RP_ID,
  sealedLoginChallenge,
  withField,
  type Answer,
  type PasskeyUser,
} from "../support/passkeys.js";
import { keysAddedSince, keysUnder, waitFor } from "../support/redis.js";
import type { Json } from "../support/rest.js";
import { startReceiver, type Receiver } from "../support/webhooks.js";
import { SoftAuthenticator } from "../support/webauthn.js";

const b64url = (s: string) => Buffer.from(s).toString("base64url");

/**
 * The passkey login (docs/session-api.md#passkeys): request options with a sealed challenge, the
 * session a verified assertion opens, and every refusal, one 401 that changes nothing.
 */
describe("passkey login (docs/session-api.md#passkeys)", () => {
  let rig: PasskeyRig;
  let appId: string;
  let hooks: Receiver;
  let hookSecret: string;
  before(async () => {
    rig = await PasskeyRig.start();
    hooks = await startReceiver();
    const made = await rig.newApp();
    appId = made.appId;
    hookSecret = await rig.subscribe(appId, made.mgmtKey, hooks.url, [
      "session.created",
      "passkey.suspicious",
    ]);
  });
  after(async () => {
    await rig.stop();
    await hooks.close();
  });

  /** The app's webhook deliveries of `type` whose payload holds `match`, once `count` arrived, each signed. */
  async function delivered(type: string, match: Json, count = 1): Promise<Json[]> {
    const mine = () =>
      hooks.requests
        .map((r) => ({ r, event: JSON.parse(r.body) as Json }))
        .filter(({ event }) => event.type === type)
        .filter(({ event }) =>
          Object.entries(match).every(([k, v]) => (event.payload as Json | undefined)?.[k] === v),
        );
    await waitFor(() => Promise.resolve(mine().length >= count));
    for (const { r } of mine()) {
      expect(verifyWebhook(hookSecret, r.body, String(r.headers["x-webhook-signature"])), "signed").to.equal(
        true,
      );
    }
    return mine().map(({ event }) => event);
  }

  it("gives request options: the app's RP ID, any discoverable credential, a challenge sealed in challenge_token, nothing written", async () => {
    const prefix = rig.app.config.REDIS_KEY_PREFIX;
    const before = await keysUnder(rig.app.registry.redis, prefix);
    const first = await rig.loginOptions(appId);
    const second = await rig.loginOptions(appId);
    expect(await keysAddedSince(rig.app.registry.redis, prefix, before)).to.deep.equal([]);
    expect(first.challenge_token).to.match(/^pl_/);
    expect(first.options).to.include({ rpId: RP_ID, timeout: 300_000, userVerification: "preferred" });
    expect(first.options.challenge).to.match(/^[A-Za-z0-9_-]{22,}$/);
    // No credential named: the browser offers any passkey of the RP ID (an empty list says the same).
    expect(first.options.allowCredentials ?? []).to.deep.equal([]);
    expect(second.challenge_token).to.not.equal(first.challenge_token);
    expect(second.options.challenge).to.not.equal(first.options.challenge);
    expect(first.challenge_token).to.not.include(String(first.options.challenge));
  });

  it("opens a session with amr [swk, mfa] and acr 2 when the authenticator verified the user; a refresh keeps them; session.created (new_user false) is sent", async () => {
    const u = await rig.user(appId);
    const id = await rig.register(u);
    const sessions = await rig.sessions(u.userId);
    const m = await rig.meter();
    const r = await rig.loginAs(u);
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    expect(Object.keys(r.body).sort()).to.deep.equal([
      "access_token",
      "expires_in",
      "refresh_token",
      "scope",
    ]);
    expect(r.body).to.include({ expires_in: 900, scope: "" });
    const claims = decodeJwt(String(r.body.access_token));
    expect(claims).to.include({ sub: u.userId, app_id: appId, acr: "2", scope: "" });
    expect(claims.amr).to.deep.equal(["swk", "mfa"]);
    expect(Number(claims.auth_time)).to.be.closeTo(Date.now() / 1000, 10);
    expect(await rig.sessions(u.userId)).to.equal(sessions + 1);
    expect(await m.grew(LOGINS, { use: "login", outcome: "success" })).to.equal(1);
    expect((await rig.stored(u, id))?.counter).to.equal(1);

    const me = await rig.call("GET", "/v1/session/me", { bearer: String(r.body.access_token) });
    expect(me.body.user_id).to.equal(u.userId);
    const refreshed = await rig.call("POST", "/v1/session/refresh", {
      body: { refresh_token: r.body.refresh_token },
    });
    expect(refreshed.status, JSON.stringify(refreshed.body)).to.equal(200);
    const after = decodeJwt(String(refreshed.body.access_token));
    expect(after).to.include({
      sub: u.userId,
      acr: "2",
      auth_time: claims.auth_time,
      session_id: claims.session_id,
    });
    expect(after.amr).to.deep.equal(["swk", "mfa"]);

    const [event] = await delivered("session.created", { session_id: claims.session_id });
    expect(event?.payload).to.deep.equal({
      user_id: u.userId,
      session_id: claims.session_id,
      new_user: false,
    });
  });

  it("opens a session with amr [swk] and acr 1 without user verification", async () => {
    const u = await rig.user(appId);
    await rig.register(u, { userVerified: false });
    const r = await rig.loginAs(u, { userVerified: false });
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    const claims = decodeJwt(String(r.body.access_token));
    expect(claims).to.include({ sub: u.userId, acr: "1" });
    expect(claims.amr).to.deep.equal(["swk"]);
    expect(claims.auth_time).to.be.a("number");
    const refreshed = await rig.call("POST", "/v1/session/refresh", {
      body: { refresh_token: r.body.refresh_token },
    });
    expect(decodeJwt(String(refreshed.body.access_token))).to.include({
      acr: "1",
      auth_time: claims.auth_time,
    });
    expect(decodeJwt(String(refreshed.body.access_token)).amr).to.deep.equal(["swk"]);
  });

  it("accepts a counter that stays 0 while the stored one is 0 (authenticators that keep no counter)", async () => {
    const counterless = await rig.user(appId);
    const cid = await rig.register(counterless, { counter: 0 });
    for (let i = 0; i < 3; i++) {
      const r = await rig.login(appId, (o) => counterless.auth.get(o, { origin: ORIGIN, counter: 0 }));
      expect(r.status, `login ${i + 1}: ${JSON.stringify(r.body)}`).to.equal(200);
    }
    expect((await rig.stored(counterless, cid))?.counter).to.equal(0);
    expect((await rig.stored(counterless, cid))?.lastUsedAt).to.be.a("string");
  });

  describe("every refusal of docs/session-api.md#passkeys: 401 invalid_credentials, nothing changed", () => {
    /**
     * Runs `attempt` and checks the one refusal: the same body, no session opened for the user, its
     * passkey's counter and last use as they were, no success counted.
     */
    async function expectRefusedWithoutChange(u: PasskeyUser, id: string, attempt: () => Promise<Answer>) {
      const [sessions, stored] = [await rig.sessions(u.userId), await rig.stored(u, id)];
      const m = await rig.meter();
      const r = await attempt();
      expect(r.status, JSON.stringify(r.body)).to.equal(401);
      expect(r.body).to.deep.equal(REFUSED);
      expect(await rig.sessions(u.userId), "sessions").to.equal(sessions);
      expect(await rig.stored(u, id), "the stored passkey").to.deep.equal(stored);
      expect(await m.grew(LOGINS, { outcome: "success" })).to.equal(0);
      return m;
    }

    let u: PasskeyUser;
    let id: string;
    before(async () => {
      u = await rig.user(appId);
      id = await rig.register(u);
    });

    it("a replayed challenge_token, after a success or after a failure", async () => {
      const { challenge_token, options } = await rig.loginOptions(appId);
      expect(
        (await rig.loginAnswer(challenge_token, u.auth.get(options, { origin: ORIGIN }))).status,
      ).to.equal(200);
      await expectRefusedWithoutChange(u, id, () =>
        rig.loginAnswer(challenge_token, u.auth.get(options, { origin: ORIGIN })),
      );
      const next = await rig.loginOptions(appId);
      await expectRefusedWithoutChange(u, id, () =>
        rig.loginAnswer(
          next.challenge_token,
          u.auth.get(next.options, { origin: "https://evil.example.org" }),
        ),
      );
      const m = await expectRefusedWithoutChange(u, id, () =>
        rig.loginAnswer(next.challenge_token, u.auth.get(next.options, { origin: ORIGIN })),
      );
      expect(await m.grew(LOGINS, { use: "login", outcome: "invalid_credentials" })).to.equal(1);
    });

    it("an expired challenge (sealed with an expiry in the past: the service reads Date.now(), no clock to move)", async () => {
      const challenge = randomBytes(32).toString("base64url");
      const options = { challenge, rpId: RP_ID };
      const expired = sealedLoginChallenge(rig.app.registry.secrets, appId, challenge, Date.now() - 1_000);
      await expectRefusedWithoutChange(u, id, () =>
        rig.loginAnswer(expired, u.auth.get(options, { origin: ORIGIN })),
      );
      // The same sealing with a live expiry is accepted: only the expiry made the difference.
      const other = randomBytes(32).toString("base64url");
      const live = sealedLoginChallenge(rig.app.registry.secrets, appId, other, Date.now() + 60_000);
      const r = await rig.loginAnswer(live, u.auth.get({ challenge: other }, { origin: ORIGIN }));
      expect(r.status, JSON.stringify(r.body)).to.equal(200);
    });

    it("a wrong origin or RP ID", async () => {
      for (const c of [
        { origin: "https://evil.example.org" },
        { origin: "http://login.example.com" },
        { origin: "https://unlisted.example.com" },
        { origin: ORIGIN, rpId: "example.org" },
        { origin: ORIGIN, rpId: "login.example.com" },
      ]) {
        await expectRefusedWithoutChange(u, id, () => rig.login(appId, (o) => u.auth.get(o, c)));
      }
    });

    it("a credential never registered, another app's, or one whose userHandle is not its user's", async () => {
      const stranger = new SoftAuthenticator();
      stranger.create(
        { challenge: "AAAA", rp: { id: RP_ID }, user: { id: b64url(u.userId) } },
        { origin: ORIGIN },
      );
      await expectRefusedWithoutChange(u, id, () =>
        rig.login(appId, (o) => stranger.get(o, { origin: ORIGIN })),
      );

      // App B shares the RP ID; its login options answered with a passkey of app A's user.
      const b = await rig.newApp(RELYING_PARTY);
      await expectRefusedWithoutChange(u, id, () =>
        rig.login(b.appId, (o) => u.auth.get(o, { origin: ORIGIN })),
      );

      const other = await rig.user(appId);
      await rig.register(other);
      for (const handle of [b64url(other.userId), b64url("usr_nobody")]) {
        await expectRefusedWithoutChange(u, id, () =>
          rig.login(appId, (o) => u.auth.get(o, { origin: ORIGIN, userHandle: handle })),
        );
      }
      // The right answer, after all that.
      expect((await rig.loginAs(u)).status).to.equal(200);
    });

    it("a signature counter that goes backwards (passkey.suspicious sent, signed) or stays equal", async () => {
      const cloned = await rig.user(appId);
      const cid = await rig.register(cloned, { counter: 5 });
      expect((await rig.stored(cloned, cid))?.counter).to.equal(5);
      expect((await rig.loginAs(cloned)).status, "6 after 5").to.equal(200);
      expect(
        (await rig.login(appId, (o) => cloned.auth.get(o, { origin: ORIGIN, counter: 10 }))).status,
      ).to.equal(200);
      expect((await rig.stored(cloned, cid))?.counter).to.equal(10);

      const m = await expectRefusedWithoutChange(cloned, cid, () =>
        rig.login(appId, (o) => cloned.auth.get(o, { origin: ORIGIN, counter: 7 })),
      );
      expect(await m.grew(LOGINS, { use: "login", outcome: "counter_backwards" })).to.equal(1);
      const [event] = await delivered("passkey.suspicious", { user_id: cloned.userId });
      expect(event?.payload).to.deep.equal({ app_id: appId, user_id: cloned.userId, credential_id: cid });

      await expectRefusedWithoutChange(cloned, cid, () =>
        rig.login(appId, (o) => cloned.auth.get(o, { origin: ORIGIN, counter: 10 })),
      );
      await expectRefusedWithoutChange(cloned, cid, () =>
        rig.login(appId, (o) => cloned.auth.get(o, { origin: ORIGIN, counter: 0 })),
      );
      expect(
        (await rig.login(appId, (o) => cloned.auth.get(o, { origin: ORIGIN, counter: 11 }))).status,
      ).to.equal(200);
    });
  });

  describe("bad input: 400 naming the field, nothing taken", () => {
    let u: PasskeyUser;
    before(async () => {
      u = await rig.user(appId);
      await rig.register(u);
    });

    it("no challenge_token, or one this service did not give", async () => {
      const { options } = await rig.loginOptions(appId);
      const credential = u.auth.get(options, { origin: ORIGIN });
      const foreign = `pl_${new Secrets(randomBytes(32)).encrypt(
        JSON.stringify({ p: "passkey-login", a: appId, c: options.challenge, e: Date.now() + 60_000 }),
      )}`;
      const m = await rig.meter();
      for (const token of [undefined, "", "pl_garbage", "xyz", foreign, `pl_${"A".repeat(2_000)}`]) {
        const r = await rig.call("POST", "/v1/session/login/passkey", {
          body: { challenge_token: token, credential },
        });
        expect(r.status, `${token?.slice(0, 20)}: ${JSON.stringify(r.body)}`).to.equal(400);
        expect(r.body).to.include({ code: "bad_request", field: "challenge_token" });
      }
      for (const outcome of ["success", "invalid_credentials", "too_many_attempts"]) {
        expect(await m.grew(LOGINS, { outcome }), outcome).to.equal(0);
      }
    });

    it("a malformed credential, which leaves the challenge for the right one", async () => {
      const { challenge_token, options } = await rig.loginOptions(appId);
      const good = u.auth.get(options, { origin: ORIGIN });
      const cases: [string, unknown][] = [
        ["credential", undefined],
        ["credential", null],
        ["credential.id", withField(good, "id", undefined)],
        ["credential.rawId", withField(good, "rawId", "b3RoZXI")],
        ["credential.type", withField(good, "type", "public_key")],
        ["credential.response", withField(good, "response", undefined)],
        ["credential.response.clientDataJSON", withField(good, "response.clientDataJSON", undefined)],
        ["credential.response.authenticatorData", withField(good, "response.authenticatorData", 5)],
        ["credential.response.signature", withField(good, "response.signature", undefined)],
        ["credential.response.signature", withField(good, "response.signature", "has spaces")],
        ["credential.response.userHandle", withField(good, "response.userHandle", false)],
      ];
      const m = await rig.meter();
      for (const [field, credential] of cases) {
        const r = await rig.loginAnswer(challenge_token, credential);
        expect(r.status, `${field}: ${JSON.stringify(r.body)}`).to.equal(400);
        expect(r.body, field).to.include({ code: "bad_request", field });
      }
      const r = await rig.loginAnswer(challenge_token, "a string");
      expect(r.status).to.equal(400);
      expect(String(r.body.message)).to.include('"credential"');
      expect(await m.grew(LOGINS, { outcome: "invalid_credentials" })).to.equal(0);
      const right = await rig.loginAnswer(challenge_token, good);
      expect(right.status, JSON.stringify(right.body)).to.equal(200);
    });

    it("login options without app_id or for an unknown app", async () => {
      for (const body of [{}, { app_id: "" }, { app_id: "app_doesnotexist" }]) {
        const r = await rig.call("POST", "/v1/session/login/passkey/options", { body });
        expect(r.status, JSON.stringify(r.body)).to.equal(400);
        expect(r.body).to.include({ code: "bad_request", field: "app_id" });
      }
    });
  });

  describe("over gRPC (ringfence.session.v1.PasskeyService)", () => {
    it("starts a login with StartPasskeyLogin and completes it with LoginWithPasskey; refuses a bad app", async () => {
      const u = await rig.user(appId);
      await rig.register(u);
      const client = new PasskeyServiceClient(rig.app.grpcAddress, insecure);
      try {
        const started = await unary(client.startPasskeyLogin.bind(client), { appId });
        expect(started.err).to.equal(null);
        expect(started.res?.challengeToken).to.match(/^pl_/);
        const options = started.res?.options ?? {};
        expect(options).to.include({ rpId: RP_ID });
        const logged = await unary(client.loginWithPasskey.bind(client), {
          challengeToken: started.res?.challengeToken ?? "",
          credential: u.auth.get(options, { origin: ORIGIN }),
        });
        expect(logged.err).to.equal(null);
        expect(decodeJwt(logged.res?.accessToken ?? "")).to.include({ sub: u.userId, acr: "2" });

        const unknown = await unary(client.startPasskeyLogin.bind(client), { appId: "app_nope" });
        expect(unknown.err?.code).to.equal(status.INVALID_ARGUMENT);
        const bare = await rig.newApp(null);
        const notConfigured = await unary(client.startPasskeyLogin.bind(client), { appId: bare.appId });
        expect(notConfigured.err?.code).to.equal(status.FAILED_PRECONDITION);
        expect(notConfigured.err?.metadata.get("x-http-status")).to.deep.equal(["400"]);
      } finally {
        client.close();
      }
    });
  });
});
