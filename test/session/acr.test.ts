import { expect } from "chai";
import { status } from "@grpc/grpc-js";
import { decodeJwt, type JWTPayload } from "jose";
import { StepUpServiceClient } from "../../src/gen/ringfence/stepup/v1/stepup_service.js";
import { RelyingParties } from "../../src/passkeys/relying-party.js";
import { hashPassword } from "../../src/session/password.js";
import { insecure, metadata, startTestApp, unary, type TestApp } from "../support/app.js";
import { newClient, tokenCall, type ClientCreds } from "../support/oauth-clients.js";
import { rest, type Json, type RestAnswer } from "../support/rest.js";
import { Receiver, SmsReceiver } from "../support/receivers.js";
import { keysAddedSince, keysUnder } from "../support/redis.js";
import { SoftAuthenticator } from "../support/webauthn.js";
import { PASSWORD, passwordUser } from "../support/passkeys.js";

const ORIGIN = "http://localhost:3000";
/** One `continue` entry for both identifier types. */
const CONT = "acct:read";
/** `continue` for email holders, `review` by SMS (120 s) for phone holders. */
const MIXED = "acct:write";
/** `block` for everyone. */
const BLOCKED = "acct:close";
/** Allowed for the app, in no entry: `block`. */
const UNCONFIGURED = "acct:other";

const entry = (
  scope: string,
  types: string[],
  decision: "continue" | "block" | "review",
  steps: Json[] = [],
) => ({
  scope,
  mode: "direct",
  direct: { identifier_types: types, status: decision, granted_for: 600, grant_mode: "session", steps },
});
const BOTH = ["phone_number", "email_address"];
const SMS_120 = { order: 1, key: "verify_sms", expiration_duration: 120 };

interface Session {
  userId: string;
  phone: string;
  email: string;
  access: string;
  refresh: string;
  claims: JWTPayload;
  auth: SoftAuthenticator;
}

describe("authentication level: acr and auth_time in session tokens, acr_values and max_age at step-up (RFC 9470)", () => {
  let app: TestApp;
  let sms: SmsReceiver;
  let mail: Receiver;
  let appId: string;
  let client: ClientCreds;
  let passwordHash: string;
  let seq = 615_800_000;

  before(async function () {
    this.timeout(30_000);
    sms = await SmsReceiver.start();
    mail = await Receiver.start();
    app = await startTestApp({
      SMS_PROVIDER: "http",
      SMS_HTTP_URL: sms.url,
      EMAIL_PROVIDER: "http",
      EMAIL_HTTP_URL: mail.url,
    });
    const { app: made, managementApiKey: mgmt } = await app.registry.apps.create("Levels");
    appId = made.appId;
    await new RelyingParties(app.registry.redis, app.registry.keys).set(appId, {
      rpId: "localhost",
      origins: [ORIGIN],
    });
    for (const scope of [CONT, MIXED, BLOCKED, UNCONFIGURED]) {
      expect(
        (await call("POST", `/v2/session/apps/${appId}/config/scopes`, { scope }, mgmt)).status,
      ).to.equal(200);
    }
    const stored = await call(
      "POST",
      `/v2/session/apps/${appId}/config/stepup`,
      {
        jwks_url: "",
        step_keys: [],
        allowed_scopes: [
          entry(CONT, BOTH, "continue"),
          entry(MIXED, ["email_address"], "continue"),
          entry(MIXED, ["phone_number"], "review", [SMS_120]),
          entry(BLOCKED, BOTH, "block"),
        ],
      },
      mgmt,
    );
    expect(stored.status, stored.text).to.equal(201);
    client = await newClient(app, { appId, key: mgmt });
    passwordHash = await hashPassword(PASSWORD);
  });
  after(async () => {
    await app.stop();
    await sms.close();
    await mail.close();
  });

  const call = (method: string, path: string, body?: unknown, bearer?: string) =>
    rest(app.baseUrl).call(method, path, { body, bearer });
  const nowSeconds = () => Math.floor(Date.now() / 1000);

  async function codeTo(to: string, after: { sms: number; mail: number }): Promise<string> {
    if (to.startsWith("+")) {
      await sms.receiver.until(() => sms.messages.slice(after.sms).some((m) => m.to === to));
      const m = sms.messages.slice(after.sms).find((x) => x.to === to);
      return SmsReceiver.code(m ?? { to, from: "", body: "", locale: "", reference: "" });
    }
    const mailTo = (r: { body: string }) => (JSON.parse(r.body) as { to: string }).to === to;
    await mail.until((r) => r.slice(after.mail).some(mailTo));
    const m = mail.received.slice(after.mail).find(mailTo);
    const found = /\b(\d{6})\b/.exec((JSON.parse(m?.body ?? "{}") as { body: string }).body);
    if (found?.[1] === undefined) throw new Error(`no code to ${to}`);
    return found[1];
  }
  const sent = () => ({ sms: sms.messages.length, mail: mail.received.length });

  function session(
    userId: string,
    phone: string,
    email: string,
    answer: RestAnswer,
    auth = new SoftAuthenticator(),
  ) {
    expect(answer.status, answer.text).to.equal(200);
    const access = String(answer.body.access_token);
    const refresh = String(answer.body.refresh_token);
    return { userId, phone, email, access, refresh, claims: decodeJwt(access), auth } satisfies Session;
  }

  /** A user (phone and email unless told) logged in by password, with `passkeys` passkeys registered. */
  async function user(passkeys = 0, has: { phone?: boolean; email?: boolean } = {}): Promise<Session> {
    const n = (seq += 1000);
    const u = await passwordUser({ app, appId, call, n, passwordHash, origin: ORIGIN, passkeys, has });
    return session(u.userId, u.phone, u.email, u.login, u.auth);
  }

  async function passkeyLogin(holder: Session, userVerified: boolean): Promise<Session> {
    const start = await call("POST", "/v1/session/login/passkey/options", { app_id: appId });
    const credential = holder.auth.get(start.body.options as Json, { origin: ORIGIN, userVerified });
    const done = await call("POST", "/v1/session/login/passkey", {
      challenge_token: start.body.challenge_token,
      credential,
    });
    return session(holder.userId, holder.phone, holder.email, done, holder.auth);
  }

  const ask = (s: Session, body: Json) => call("POST", "/v1/session/stepup/request", body, s.access);
  const scopesOf = async (s: Session) =>
    (await call("GET", "/v1/session/me", undefined, s.access)).body.scopes;

  /** Completes the review `asked` (a code or a passkey step) and redeems the step-up token. */
  async function complete(s: Session, asked: RestAnswer, before: { sms: number; mail: number }) {
    expect(asked.body.status, asked.text).to.equal("review");
    const [first] = asked.body.steps as { key: string }[];
    const done =
      first?.key === "verify_passkey"
        ? await call("POST", "/v1/session/passkey/check", {
            challenge_token: asked.body.challenge_token,
            credential: s.auth.get(asked.body.passkey_options as Json, { origin: ORIGIN }),
          })
        : await call("POST", "/v1/session/otp/check", {
            challenge_token: asked.body.challenge_token,
            code: await codeTo(first?.key === "verify_sms" ? s.phone : s.email, before),
          });
    expect(done.body.current_step, done.text).to.equal("completed");
    const redeemed = await call("POST", "/v1/session/refresh", { step_up_token: done.body.challenge_token });
    return session(s.userId, s.phone, s.email, redeemed, s.auth);
  }

  describe("acr in the tokens of each login", () => {
    for (const [kind, type] of [
      ["SMS", "phone_number"],
      ["email", "email_address"],
    ] as const) {
      it(`an OTP login by ${kind}: acr "1", amr ${type === "phone_number" ? '["otp", "sms"]' : '["otp"]'}, auth_time now`, async () => {
        const value = type === "phone_number" ? `+33${(seq += 1000)}` : `otp${(seq += 1000)}@example.com`;
        const before = sent();
        const started = await call("POST", "/v1/session/login/otp", {
          app_id: appId,
          identifier: { type, value },
        });
        const code = await codeTo(value, before);
        const s = session(
          "",
          "",
          "",
          await call("POST", "/v1/session/login/otp/check", {
            challenge_token: started.body.challenge_token,
            code,
          }),
        );
        expect(s.claims).to.include({ acr: "1" });
        expect(s.claims.amr).to.deep.equal(type === "phone_number" ? ["otp", "sms"] : ["otp"]);
        expect(Number(s.claims.auth_time)).to.be.closeTo(nowSeconds(), 5);
      });
    }

    it('a password login: acr "1", amr ["pwd"]', async () => {
      const s = await user();
      expect(s.claims).to.include({ acr: "1" });
      expect(s.claims.amr).to.deep.equal(["pwd"]);
      expect(Number(s.claims.auth_time)).to.be.closeTo(nowSeconds(), 5);
    });

    for (const [userVerified, acr, amr] of [
      [true, "2", ["swk", "mfa"]],
      [false, "1", ["swk"]],
    ] as const) {
      it(`a passkey login ${userVerified ? "with" : "without"} user verification: acr "${acr}", amr ${JSON.stringify(amr)}; a refresh keeps acr, amr and auth_time`, async () => {
        const s = await passkeyLogin(await user(1), userVerified);
        expect(s.claims).to.include({ acr });
        expect(s.claims.amr).to.deep.equal(amr);
        const refreshed = await call("POST", "/v1/session/refresh", { refresh_token: s.refresh });
        const claims = decodeJwt(String(refreshed.body.access_token));
        expect(claims).to.include({ acr, auth_time: s.claims.auth_time, session_id: s.claims.session_id });
        expect(claims.amr).to.deep.equal(amr);
      });
    }

    it("introspection answers a session token's acr and auth_time, at each level", async () => {
      const holder = await user(1);
      for (const s of [holder, await passkeyLogin(holder, true)]) {
        const r = await tokenCall(app, "introspect", { token: s.access }, client);
        expect(r.status, r.text).to.equal(200);
        expect(r.body).to.deep.include({
          active: true,
          sub: s.userId,
          session_id: s.claims.session_id,
          acr: s.claims.acr,
          auth_time: s.claims.auth_time,
        });
      }
    });
  });

  describe("refused requests (acr_values, max_age): 400 and nothing changes", () => {
    async function expectRefused(s: Session, body: Json, field: string) {
      const keys = await keysUnder(app.registry.redis, app.config.REDIS_KEY_PREFIX);
      const before = sent();
      const r = await ask(s, { scope: CONT, ...body });
      expect(r.status, r.text).to.equal(400);
      expect(r.body.code).to.equal("bad_request");
      // The service's own checks answer `field`; the proto3 JSON decoder (a number that is not an
      // int32, a string for a number, a number for a string) names it only in its message.
      if (r.body.field === undefined)
        expect(r.body.message, r.text).to.include(`RequestStepUpRequest.${field} from JSON`);
      else expect(r.body.field, r.text).to.equal(field);
      const added = await keysAddedSince(app.registry.redis, app.config.REDIS_KEY_PREFIX, keys);
      expect(added.filter((k) => k.includes(s.userId))).to.deep.equal([]);
      expect(sent()).to.deep.equal(before);
      expect(await scopesOf(s)).to.deep.equal([]);
    }

    for (const bad of ["3", "gold", "2 x", "0", "1,2", "1\t2", "２"]) {
      it(`acr_values ${JSON.stringify(bad)}: 400 bad_request, field acr_values`, async () => {
        const s = await user();
        await expectRefused(s, { acr_values: bad }, "acr_values");
        const r = await ask(s, { scope: CONT, acr_values: bad });
        expect(r.body.field).to.equal("acr_values");
        expect(r.body.message).to.include('"1"').and.include('"2"');
      });
    }

    for (const bad of [-1, -300]) {
      it(`max_age ${bad}: 400 bad_request, field max_age`, async () => {
        const s = await user();
        await expectRefused(s, { max_age: bad }, "max_age");
        expect((await ask(s, { scope: CONT, max_age: bad })).body).to.include({ field: "max_age" });
      });
    }

    for (const bad of [1.5, "soon", "", 2 ** 31, true]) {
      it(`max_age ${JSON.stringify(bad)} (not an int32): 400 bad_request naming max_age`, async () => {
        await expectRefused(await user(), { max_age: bad }, "max_age");
      });
    }

    it("acr_values 2 (a number, not a string): 400 bad_request naming acr_values", async () => {
      await expectRefused(await user(), { acr_values: 2 }, "acr_values");
    });

    it('max_age as the string "300" is proto3 JSON for 300: accepted like the number', async () => {
      const r = await ask(await user(), { scope: CONT, max_age: "300" });
      expect(r.status, r.text).to.equal(200);
      expect(r.body.status).to.equal("continue");
    });

    it("over gRPC: INVALID_ARGUMENT naming acr_values and max_age", async () => {
      const s = await user();
      const stepups = new StepUpServiceClient(app.grpcAddress, insecure);
      const bearer = metadata({ authorization: `Bearer ${s.access}` });
      for (const [req, field] of [
        [{ acrValues: "gold", maxAge: undefined }, "acr_values"],
        [{ acrValues: "", maxAge: -5 }, "max_age"],
      ] as const) {
        const r = await unary(
          stepups.requestStepUp.bind(stepups),
          { scope: CONT, metadata: undefined, ...req },
          bearer,
        );
        expect(r.err?.code).to.equal(status.INVALID_ARGUMENT);
        expect(r.err?.details).to.match(new RegExp(`^${field}: `));
      }
      stepups.close();
    });
  });

  describe("a session that falls short is challenged where the decision was continue", () => {
    it('acr "1" + continue + acr_values "2": verify_sms; the redeemed token carries acr "2", auth_time now and the scope; refreshes keep them; then continue', async () => {
      const s = await user();
      const before = sent();
      const asked = await ask(s, { scope: CONT, acr_values: "2" });
      // The fallback step: the user holds no passkey but a phone; the code lives OTP_TTL_SECONDS.
      expect(asked.body.steps).to.deep.equal([
        { order: 1, key: "verify_sms", expiration_duration: app.config.OTP_TTL_SECONDS },
      ]);
      expect(await scopesOf(s)).to.deep.equal([]);
      const stepped = await complete(s, asked, before);
      expect(stepped.claims).to.include({ acr: "2", session_id: s.claims.session_id });
      expect(stepped.claims.auth_time).to.be.at.least(Number(s.claims.auth_time));
      expect(Number(stepped.claims.auth_time)).to.be.closeTo(nowSeconds(), 5);
      expect(String(stepped.claims.scope).split(" ")).to.include(CONT);
      expect(stepped.claims.amr).to.deep.equal(["pwd"]);

      const later = await call("POST", "/v1/session/refresh", { refresh_token: stepped.refresh });
      expect(later.status, later.text).to.equal(200);
      expect(decodeJwt(String(later.body.access_token))).to.include({
        acr: "2",
        auth_time: stepped.claims.auth_time,
      });

      const again = await ask(stepped, { scope: CONT, acr_values: "2" });
      expect(again.body.status, again.text).to.equal("continue");
    });

    it("takes the steps of the scope's first review entry the user matches (verify_sms, 120 s)", async () => {
      const asked = await ask(await user(), { scope: MIXED, acr_values: "2" });
      expect(asked.body.status, asked.text).to.equal("review");
      expect(asked.body.steps).to.deep.equal([SMS_120]);
    });

    it("gives an email-only user verify_email, and completes it", async () => {
      const s = await user(0, { phone: false });
      const before = sent();
      const asked = await ask(s, { scope: CONT, acr_values: "2" });
      expect((asked.body.steps as Json[])[0]).to.include({ order: 1, key: "verify_email" });
      expect((await complete(s, asked, before)).claims.acr).to.equal("2");
    });

    it("gives a passkey holder verify_passkey with passkey_options, and completes it", async () => {
      const s = await user(1);
      const before = sent();
      const asked = await ask(s, { scope: CONT, acr_values: "2" });
      expect(asked.body.steps).to.deep.equal([{ order: 1, key: "verify_passkey", expiration_duration: 300 }]);
      expect(asked.body.passkey_options).to.include({ rpId: "localhost" });
      const stepped = await complete(s, asked, before);
      expect(stepped.claims.acr).to.equal("2");
      expect(sent().sms).to.equal(before.sms);
    });

    it('max_age 0 asks every time, even of an acr "2" session; max_age 3600 of a fresh one does not', async () => {
      const fresh = await user();
      expect((await ask(fresh, { scope: CONT, max_age: 3600 })).body.status).to.equal("continue");
      const strong = await passkeyLogin(await user(1), true);
      expect((await ask(strong, { scope: CONT, acr_values: "2", max_age: 3600 })).body.status).to.equal(
        "continue",
      );
      for (const s of [await user(), strong]) {
        const asked = await ask(s, { scope: CONT, max_age: 0 });
        expect(asked.body.status, asked.text).to.equal("review");
      }
    });
  });

  describe("a session that meets the request, and decisions that stay", () => {
    for (const values of ["1", "1 2", "2 1", " 1  "]) {
      it(`acr_values ${JSON.stringify(values)}: an acr "1" session meets it, continue and granted`, async () => {
        const s = await user();
        const asked = await ask(s, { scope: CONT, acr_values: values });
        expect(asked.body.status, asked.text).to.equal("continue");
        expect(await scopesOf(s)).to.deep.equal([CONT]);
      });
    }

    it('acr_values "2": an acr "2" session (passkey login with user verification) gets continue at once', async () => {
      const s = await passkeyLogin(await user(1), true);
      const before = sent();
      const asked = await ask(s, { scope: CONT, acr_values: "2", max_age: 60 });
      expect(asked.body.status, asked.text).to.equal("continue");
      expect(await scopesOf(s)).to.deep.equal([CONT]);
      expect(sent()).to.deep.equal(before);
    });

    for (const [name, scope] of [
      ["a block entry", BLOCKED],
      ["a scope without entries", UNCONFIGURED],
    ] as const) {
      it(`block stays block for ${name}, with acr_values "2" and max_age 0`, async () => {
        const s = await user();
        const asked = await ask(s, { scope, acr_values: "2", max_age: 0 });
        expect(asked.body.status, asked.text).to.equal("block");
        expect(await scopesOf(s)).to.deep.equal([]);
      });
    }

    it('review stays review with its own steps, even when acr_values "1" is met', async () => {
      const s = await user(0, { email: false });
      const asked = await ask(s, { scope: MIXED, acr_values: "1" });
      expect(asked.body.status, asked.text).to.equal("review");
      expect(asked.body.steps).to.deep.equal([SMS_120]);
    });
  });
});
