import { expect } from "chai";
import { decodeJwt } from "jose";
import { hashPassword } from "../../src/session/password.js";
import { RelyingParties } from "../../src/passkeys/relying-party.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { rest, type Json, type RestAnswer } from "../support/rest.js";
import { Receiver, SmsReceiver } from "../support/receivers.js";
import { sample } from "../support/metrics.js";
import { keysAddedSince, keysUnder } from "../support/redis.js";
import { SoftAuthenticator } from "../support/webauthn.js";
import { PASSWORD, passwordUser } from "../support/passkeys.js";

const ORIGIN = "http://localhost:3000";
/** verify_passkey for email holders, then a phone entry (the pair rule forbids two entries per type). */
const PAY = "pay:write";
/** Two steps: an SMS code, then a passkey. */
const SMS_THEN_PASSKEY = "two:sms-first";
/** Two steps: a passkey, then an SMS code. */
const PASSKEY_THEN_SMS = "two:passkey-first";

const step = (order: number, key: string, seconds = 300) => ({ order, key, expiration_duration: seconds });
const review = (scope: string, types: string[], steps: Json[]) => ({
  scope,
  mode: "direct",
  direct: { identifier_types: types, status: "review", granted_for: 300, grant_mode: "session", steps },
});

const CONFIG = {
  jwks_url: "",
  step_keys: [],
  allowed_scopes: [
    review(PAY, ["email_address"], [step(1, "verify_passkey")]),
    review(PAY, ["phone_number"], [step(1, "verify_sms", 120)]),
    review(SMS_THEN_PASSKEY, ["phone_number"], [step(1, "verify_sms"), step(2, "verify_passkey")]),
    review(PASSKEY_THEN_SMS, ["phone_number"], [step(1, "verify_passkey"), step(2, "verify_sms")]),
  ],
};

interface User {
  userId: string;
  phone: string;
  email: string;
  access: string;
  auth: SoftAuthenticator;
  passkeys: string[];
}

let phoneSeq = 614_700_000;

/** An app with a relying party and CONFIG, its SMS gateway and webhook receiver, and user helpers. */
async function startRig(env: Record<string, string> = {}) {
  const sms = await SmsReceiver.start();
  const hooks = await Receiver.start();
  const app: TestApp = await startTestApp({
    SMS_PROVIDER: "http",
    SMS_HTTP_URL: sms.url,
    WEBHOOK_BACKOFF_BASE_MS: "50",
    ...env,
  });
  const { app: made, managementApiKey: mgmt } = await app.registry.apps.create("Passkey step-up");
  const appId = made.appId;
  await new RelyingParties(app.registry.redis, app.registry.keys).set(appId, {
    rpId: "localhost",
    origins: [ORIGIN],
  });
  const passwordHash = await hashPassword(PASSWORD);
  const call = (method: string, path: string, body?: unknown, bearer?: string) =>
    rest(app.baseUrl).call(method, path, { body, bearer });
  for (const scope of [PAY, SMS_THEN_PASSKEY, PASSKEY_THEN_SMS]) {
    const added = await call("POST", `/v2/session/apps/${appId}/config/scopes`, { scope }, mgmt);
    expect(added.status, added.text).to.equal(200);
  }
  const stored = await call("POST", `/v2/session/apps/${appId}/config/stepup`, CONFIG, mgmt);
  expect(stored.status, stored.text).to.equal(201);
  const hook = await call(
    "POST",
    `/v2/session/apps/${appId}/webhooks`,
    { url: hooks.url, events: ["passkey.suspicious"] },
    mgmt,
  );
  expect(hook.status, hook.text).to.equal(201);

  /** A user logged in by password, holding `passkeys` passkeys, with a phone and an email unless told. */
  async function user(passkeys = 1, has: { phone?: boolean; email?: boolean } = {}): Promise<User> {
    const n = (phoneSeq += 1000);
    return passwordUser({ app, appId, call, n, passwordHash, origin: ORIGIN, passkeys, has });
  }

  /** The code of the first SMS to `phone` from message `after` on. */
  async function smsCode(phone: string, after: number): Promise<string> {
    await sms.receiver.until(() => sms.messages.slice(after).some((m) => m.to === phone));
    const m = sms.messages.slice(after).find((x) => x.to === phone);
    if (m === undefined) throw new Error("no SMS");
    return SmsReceiver.code(m);
  }

  const metric = async (outcome: string) =>
    sample((await app.registry.metrics.exposition()).body, "ringfence_passkey_logins_total", {
      use: "step_up",
      outcome,
    });

  const stop = async () => {
    await app.stop();
    await sms.close();
    await hooks.close();
  };
  return { app, appId, mgmt, sms, hooks, call, user, smsCode, metric, stop };
}

describe("passkeys in step-up (verify_passkey steps)", () => {
  let rig: Awaited<ReturnType<typeof startRig>>;
  before(async function () {
    this.timeout(30_000);
    rig = await startRig();
  });
  after(async () => {
    await rig.stop();
  });

  const ask = (u: User, scope: string) => rig.call("POST", "/v1/session/stepup/request", { scope }, u.access);
  const passkeyCheck = (challenge_token: unknown, credential: unknown) =>
    rig.call("POST", "/v1/session/passkey/check", { challenge_token, credential });
  const otpCheck = (challenge_token: unknown, code: string) =>
    rig.call("POST", "/v1/session/otp/check", { challenge_token, code });
  const answer = (u: User, asked: RestAnswer, c: { origin?: string } & Json = {}) =>
    u.auth.get(asked.body.passkey_options as Json, { origin: ORIGIN, ...c });

  function expectError(r: RestAnswer, status: number, code: string, field?: string) {
    expect(r.status, r.text).to.equal(status);
    expect(r.body.code, r.text).to.equal(code);
    if (field !== undefined) expect(r.body.field, r.text).to.equal(field);
  }

  /** A review of PAY opened for a passkey holder, checked. */
  async function openPasskeyStep(u: User): Promise<RestAnswer> {
    const asked = await ask(u, PAY);
    expect(asked.status, asked.text).to.equal(200);
    expect(asked.body.status).to.equal("review");
    return asked;
  }

  describe("the configuration endpoint", () => {
    const put = (entry: Json) =>
      rig.call(
        "POST",
        `/v2/session/apps/${rig.appId}/config/stepup`,
        { jwks_url: "", step_keys: [], allowed_scopes: [entry] },
        rig.mgmt,
      );

    it("accepts a direct entry with steps [{order: 1, key: verify_passkey, expiration_duration: 300}] and echoes it", async () => {
      const stored = await rig.call("POST", `/v2/session/apps/${rig.appId}/config/stepup`, CONFIG, rig.mgmt);
      expect(stored.status, stored.text).to.equal(201);
      const first = (stored.body.allowed_scopes as { direct: Json }[])[0];
      expect(first?.direct.steps).to.deep.equal([step(1, "verify_passkey")]);
      expect(first?.direct.identifier_types).to.deep.equal(["email_address"]);
    });

    for (const [name, types, field] of [
      ["empty", [], "allowed_scopes[0].direct.identifier_types"],
      ["unknown", ["passkey"], "allowed_scopes[0].direct.identifier_types[0]"],
    ] as const) {
      it(`still requires and checks identifier_types (${name}) on a verify_passkey entry`, async () => {
        const r = await put(review(PAY, [...types], [step(1, "verify_passkey")]));
        expectError(r, 400, "invalid_stepup_config", field);
      });
    }

    it("names verify_email, verify_sms and verify_passkey in the message for a bad step key", async () => {
      const r = await put(review(PAY, ["email_address"], [step(1, "Verify-Passkey")]));
      expectError(r, 400, "invalid_stepup_config", "allowed_scopes[0].direct.steps[0].key");
      for (const key of ["verify_email", "verify_sms", "verify_passkey"])
        expect(r.body.message).to.include(key);
    });
  });

  describe("the decision and a completed passkey step", () => {
    it("answers passkey_options naming exactly the user's passkeys, completes, and the redeemed token carries acr 2", async () => {
      const u = await rig.user(2);
      const other = await rig.user(1);
      const smsBefore = rig.sms.messages.length;
      const successes = await rig.metric("success");
      const loginAuthTime = decodeJwt(u.access).auth_time as number;
      const asked = await openPasskeyStep(u);
      expect(asked.body.steps).to.deep.equal([step(1, "verify_passkey")]);
      expect(String(asked.body.challenge_token)).to.match(/^sc_usr_/);
      const options = asked.body.passkey_options as Json;
      expect(options.rpId).to.equal("localhost");
      expect(options.challenge).to.be.a("string").and.not.equal("");
      const allowed = (options.allowCredentials as { id: string; type: string }[]).map((c) => c.id);
      expect(allowed).to.have.members(u.passkeys).and.have.length(2);
      expect(allowed).to.not.include(other.passkeys[0]);

      const done = await passkeyCheck(asked.body.challenge_token, answer(u, asked));
      expect(done.status, done.text).to.equal(200);
      expect(done.body.current_step).to.equal("completed");
      expect(String(done.body.challenge_token)).to.match(/^st_usr_/);
      expect(done.body).to.not.have.property("passkey_options");

      const redeemed = await rig.call("POST", "/v1/session/refresh", {
        step_up_token: done.body.challenge_token,
      });
      expect(redeemed.status, redeemed.text).to.equal(200);
      const claims = decodeJwt(String(redeemed.body.access_token));
      expect(claims.acr).to.equal("2");
      expect(claims.auth_time).to.be.at.least(loginAuthTime);
      expect(String(claims.scope).split(" ")).to.include(PAY);
      // No code went anywhere, and the metric counted one step-up success.
      expect(rig.sms.messages.slice(smsBefore).filter((m) => m.to === u.phone)).to.deep.equal([]);
      expect(await rig.metric("success")).to.equal(successes + 1);
    });

    it("lets a user without a passkey fall through to the next entry (verify_sms), without passkey_options", async () => {
      const u = await rig.user(0);
      const before = rig.sms.messages.length;
      const asked = await ask(u, PAY);
      expect(asked.status, asked.text).to.equal(200);
      expect(asked.body).to.include({ status: "review" });
      expect(asked.body.steps).to.deep.equal([step(1, "verify_sms", 120)]);
      expect(asked.body).to.not.have.property("passkey_options");
      const code = await rig.smsCode(u.phone, before);
      const done = await otpCheck(asked.body.challenge_token, code);
      expect(done.body.current_step, done.text).to.equal("completed");
    });

    it("blocks PAY for an email-only user without a passkey: no entry matches, none is delegated", async () => {
      const asked = await ask(await rig.user(0, { phone: false }), PAY);
      expect(asked.body.status, asked.text).to.equal("block");
      expect(asked.body.challenge_token ?? "", asked.text).to.equal("");
    });

    it("gives an email-only passkey holder the verify_passkey entry of PAY", async () => {
      const asked = await ask(await rig.user(1, { phone: false }), PAY);
      expect(asked.body.status, asked.text).to.equal("review");
      expect(asked.body.steps).to.deep.equal([step(1, "verify_passkey")]);
    });

    it("blocks the two-step scopes for a phone user without a passkey: their only entries need one", async () => {
      const u = await rig.user(0);
      // SMS_THEN_PASSKEY and PASSKEY_THEN_SMS both hold a verify_passkey step: no entry matches.
      for (const scope of [SMS_THEN_PASSKEY, PASSKEY_THEN_SMS]) {
        const asked = await ask(u, scope);
        expect(asked.status, asked.text).to.equal(200);
        expect(asked.body.status, scope).to.equal("block");
        expect(asked.body.challenge_token ?? "", asked.text).to.equal("");
        expect(asked.body.steps ?? [], asked.text).to.deep.equal([]);
      }
    });

    it("[verify_sms, verify_passkey]: the otp/check answer opening the passkey step carries passkey_options", async () => {
      const u = await rig.user(1);
      const before = rig.sms.messages.length;
      const asked = await ask(u, SMS_THEN_PASSKEY);
      expect(asked.body.status, asked.text).to.equal("review");
      expect(asked.body.steps).to.deep.equal([step(1, "verify_sms"), step(2, "verify_passkey")]);
      expect(asked.body).to.not.have.property("passkey_options");
      const first = await otpCheck(asked.body.challenge_token, await rig.smsCode(u.phone, before));
      expect(first.status, first.text).to.equal(200);
      expect(first.body.current_step).to.equal("verify_passkey");
      const options = first.body.passkey_options as Json;
      expect((options.allowCredentials as { id: string }[]).map((c) => c.id)).to.deep.equal(u.passkeys);
      const done = await passkeyCheck(first.body.challenge_token, answer(u, first));
      expect(done.body.current_step, done.text).to.equal("completed");
      const redeemed = await rig.call("POST", "/v1/session/refresh", {
        step_up_token: done.body.challenge_token,
      });
      expect(decodeJwt(String(redeemed.body.access_token)).acr).to.equal("2");
    });

    it("[verify_passkey, verify_sms]: no SMS until the passkey step is done, then the SMS goes", async () => {
      const u = await rig.user(1);
      const before = rig.sms.messages.length;
      const asked = await ask(u, PASSKEY_THEN_SMS);
      expect(asked.body.status, asked.text).to.equal("review");
      expect(asked.body.passkey_options).to.be.an("object");
      const first = await passkeyCheck(asked.body.challenge_token, answer(u, asked));
      expect(first.status, first.text).to.equal(200);
      expect(first.body.current_step).to.equal("verify_sms");
      expect(first.body).to.not.have.property("passkey_options");
      const code = await rig.smsCode(u.phone, before);
      // The SMS is the only one of this user since the request: the passkey step sent none.
      expect(rig.sms.messages.slice(before).filter((m) => m.to === u.phone)).to.have.length(1);
      const done = await otpCheck(first.body.challenge_token, code);
      expect(done.body.current_step, done.text).to.equal("completed");
    });
  });

  describe("refusals", () => {
    it("otp/check refuses a verify_passkey step's token with 400 naming challenge_token, and leaves it usable", async () => {
      const u = await rig.user(1);
      const asked = await openPasskeyStep(u);
      expectError(
        await otpCheck(asked.body.challenge_token, "123456"),
        400,
        "bad_request",
        "challenge_token",
      );
      const done = await passkeyCheck(asked.body.challenge_token, answer(u, asked));
      expect(done.body.current_step, done.text).to.equal("completed");
    });

    it("passkey/check refuses a verify_sms step's token with 400 expired_challenge, and leaves the code usable", async () => {
      const u = await rig.user(1);
      const before = rig.sms.messages.length;
      const asked = await ask(u, SMS_THEN_PASSKEY);
      const code = await rig.smsCode(u.phone, before);
      const refused = await passkeyCheck(
        asked.body.challenge_token,
        u.auth.get({ challenge: "AAAA" }, { origin: ORIGIN }),
      );
      expectError(refused, 400, "expired_challenge");
      const r = await otpCheck(asked.body.challenge_token, code);
      expect(r.body.current_step, r.text).to.equal("verify_passkey");
    });

    const wrong: [string, (u: User, other: User, asked: RestAnswer) => Json][] = [
      ["another user's credential", (_u, other, asked) => answer(other, asked)],
      ["a wrong origin", (u, _o, asked) => answer(u, asked, { origin: "http://localhost:4000" })],
      ["a wrong rpId", (u, _o, asked) => answer(u, asked, { rpId: "example.com" })],
    ];
    for (const [name, make] of wrong) {
      it(`answers 401 invalid_credentials for ${name}, then 400 expired_challenge for the same token`, async () => {
        const [u, other] = [await rig.user(1), await rig.user(1)];
        const refusedBefore = await rig.metric("invalid_credentials");
        const asked = await openPasskeyStep(u);
        expectError(
          await passkeyCheck(asked.body.challenge_token, make(u, other, asked)),
          401,
          "invalid_credentials",
        );
        expect(await rig.metric("invalid_credentials")).to.equal(refusedBefore + 1);
        // The challenge was taken by the attempt: even the right passkey now finds none.
        expectError(
          await passkeyCheck(asked.body.challenge_token, answer(u, asked)),
          400,
          "expired_challenge",
        );
      });
    }

    it("answers 401 for a signature counter going backwards, emits passkey.suspicious, counts counter_backwards", async () => {
      const u = await rig.user(1);
      const first = await openPasskeyStep(u);
      const ok = await passkeyCheck(first.body.challenge_token, answer(u, first, { counter: 10 }));
      expect(ok.body.current_step, ok.text).to.equal("completed");
      const backwardsBefore = await rig.metric("counter_backwards");
      const second = await openPasskeyStep(u);
      expectError(
        await passkeyCheck(second.body.challenge_token, answer(u, second, { counter: 3 })),
        401,
        "invalid_credentials",
      );
      expect(await rig.metric("counter_backwards")).to.equal(backwardsBefore + 1);
      await rig.hooks.until((r) => r.some((x) => x.body.includes(u.userId)));
      const event = rig.hooks.received
        .map((x) => JSON.parse(x.body) as Json)
        .find((e) => {
          return (e.payload as Json).user_id === u.userId;
        });
      expect(event?.type).to.equal("passkey.suspicious");
      expect(event?.payload).to.deep.equal({
        app_id: rig.appId,
        user_id: u.userId,
        credential_id: u.passkeys[0],
      });
    });

    it("answers 400 expired_challenge to a second attempt after a right one, and to unknown tokens", async () => {
      const u = await rig.user(1);
      const asked = await openPasskeyStep(u);
      const credential = answer(u, asked);
      expect((await passkeyCheck(asked.body.challenge_token, credential)).status).to.equal(200);
      expectError(await passkeyCheck(asked.body.challenge_token, answer(u, asked)), 400, "expired_challenge");
      const forged = `sc_${u.userId}.${"A".repeat(43)}`;
      for (const token of [forged, "sc_nope", "st_whatever"]) {
        expectError(await passkeyCheck(token, credential), 400, "expired_challenge");
      }
    });

    const malformed: [string, (c: Json) => unknown][] = [
      [
        "credential.response.signature",
        (c) => ({ ...c, response: { ...(c.response as Json), signature: "not base64url!" } }),
      ],
      [
        "credential.response.authenticatorData",
        (c) => ({ ...c, response: { ...(c.response as Json), authenticatorData: undefined } }),
      ],
      ["credential.type", (c) => ({ ...c, type: "password" })],
      ["credential", () => undefined],
    ];
    for (const [field, spoil] of malformed) {
      it(`answers 400 naming ${field} for a malformed credential, and does not consume the challenge`, async () => {
        const u = await rig.user(1);
        const asked = await openPasskeyStep(u);
        const good = answer(u, asked);
        expectError(await passkeyCheck(asked.body.challenge_token, spoil(good)), 400, "bad_request", field);
        const done = await passkeyCheck(asked.body.challenge_token, good);
        expect(done.body.current_step, done.text).to.equal("completed");
      });
    }

    it("answers 400 naming challenge_token when it is missing, writing nothing", async () => {
      const u = await rig.user(1);
      const asked = await openPasskeyStep(u);
      const keys = await keysUnder(rig.app.registry.redis, rig.app.config.REDIS_KEY_PREFIX);
      const r = await rig.call("POST", "/v1/session/passkey/check", { credential: answer(u, asked) });
      expectError(r, 400, "bad_request", "challenge_token");
      const added = await keysAddedSince(rig.app.registry.redis, rig.app.config.REDIS_KEY_PREFIX, keys);
      expect(added.filter((k) => k.includes(u.userId))).to.deep.equal([]);
      // The challenge is still there for the right call.
      const done = await passkeyCheck(asked.body.challenge_token, answer(u, asked));
      expect(done.body.current_step, done.text).to.equal("completed");
    });
  });

  describe("STEPUP_LIMIT_SESSION 2/900", () => {
    let limited: Awaited<ReturnType<typeof startRig>>;
    before(async function () {
      this.timeout(30_000);
      limited = await startRig({ STEPUP_LIMIT_SESSION: "2/900" });
    });
    after(async () => {
      await limited.stop();
    });

    it("counts each opened passkey step: the third request of a session is 429 too_many_attempts", async () => {
      const u = await limited.user(1);
      for (let i = 0; i < 2; i++) {
        const r = await limited.call("POST", "/v1/session/stepup/request", { scope: PAY }, u.access);
        expect(r.body.status, r.text).to.equal("review");
      }
      const third = await limited.call("POST", "/v1/session/stepup/request", { scope: PAY }, u.access);
      expectError(third, 429, "too_many_attempts");
      expect(Number(third.headers.get("retry-after"))).to.be.within(1, 900);
      const refusals = sample(
        (await limited.app.registry.metrics.exposition()).body,
        "ringfence_abuse_refusals_total",
        {
          rule: "STEPUP_LIMIT_SESSION",
        },
      );
      expect(refusals).to.equal(1);
      // The window is the session's: another session of the user opens its step.
      const other = await limited.call("POST", "/v1/session/login/password", {
        app_id: limited.appId,
        identifier: { type: "phone_number", value: u.phone },
        password: PASSWORD,
      });
      const fresh = await limited.call(
        "POST",
        "/v1/session/stepup/request",
        { scope: PAY },
        String(other.body.access_token),
      );
      expect(fresh.body.status, fresh.text).to.equal("review");
    });
  });
});
