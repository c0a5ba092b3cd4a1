import { expect } from "chai";
import { status } from "@grpc/grpc-js";
import { createRemoteJWKSet, decodeJwt, decodeProtectedHeader, jwtVerify } from "jose";
import { SessionServiceClient } from "../../src/gen/ringfence/session/v1/session_service.js";
import { StepUpServiceClient } from "../../src/gen/ringfence/stepup/v1/stepup_service.js";
import { verifyWebhook } from "../../src/webhooks/signature.js";
import { cliEnv, insecure, metadata, runCli, startTestApp, unary, type TestApp } from "../support/app.js";
import { basicAuth, rest, type Json } from "../support/rest.js";
import { Receiver, SmsReceiver } from "../support/receivers.js";
import { PWD, reviewEntry } from "../support/stepup.js";

interface Tokens {
  access_token: string;
  refresh_token: string;
  expires_in: number;
  scope: string;
}

/** The specification's two-entry configuration: email with verify_email, phone with verify_sms. */
const TWO_ENTRY_CONFIG = {
  jwks_url: "",
  step_keys: [],
  allowed_scopes: [reviewEntry("email_address", "verify_email"), reviewEntry("phone_number", "verify_sms")],
};

describe("sessions, step-up and password change", () => {
  let app: TestApp;
  let sms: SmsReceiver;
  let mail: Receiver;
  let hooks: Receiver;
  let appId: string;
  let mgmtKey: string;
  let phoneSeq = 612_400_000;
  const freshPhone = () => `+33${(phoneSeq += 1000)}`;
  let mailSeq = 0;
  const freshEmail = () => `user${++mailSeq}@example.com`;

  before(async function () {
    this.timeout(30_000);
    sms = await SmsReceiver.start();
    mail = await Receiver.start();
    hooks = await Receiver.start();
    app = await startTestApp({
      SMS_PROVIDER: "http",
      SMS_HTTP_URL: sms.url,
      EMAIL_PROVIDER: "http",
      EMAIL_HTTP_URL: mail.url,
      WEBHOOK_BACKOFF_BASE_MS: "50",
    });
    const made = await runCli(["apps", "create", "--name", "Shop"], cliEnv(app.config));
    ({ app_id: appId, management_api_key: mgmtKey } = JSON.parse(made.stdout) as {
      app_id: string;
      management_api_key: string;
    });
  });
  after(async () => {
    await app.stop();
    await sms.close();
    await mail.close();
    await hooks.close();
  });

  const call = (method: string, path: string, body?: unknown, bearer?: string) =>
    rest(app.baseUrl).call(method, path, { body, bearer });
  /** POST /v1/session/me/password/reset with `body`, as the session of `bearer`. */
  const resetPassword = (body: { password: string }, bearer: string) =>
    call("POST", "/v1/session/me/password/reset", body, bearer);

  const codeIn = (text: string) => {
    const m = /\b(\d{6})\b/.exec(text);
    if (m?.[1] === undefined) throw new Error(`no code in ${text}`);
    return m[1];
  };

  async function lastSmsCodeTo(phone: string, after: number): Promise<string> {
    await sms.receiver.until((r) => r.slice(after).some((x) => x.body.includes(phone)));
    const m = sms.messages.slice(after).find((x) => x.to === phone);
    return codeIn(m?.body ?? "");
  }

  async function lastMailCodeTo(email: string, after: number): Promise<string> {
    await mail.until((r) => r.slice(after).some((x) => x.body.includes(email)));
    const m = mail.received.slice(after).find((x) => (JSON.parse(x.body) as { to: string }).to === email);
    return codeIn((JSON.parse(m?.body ?? "{}") as { body: string }).body);
  }

  async function login(identifier: { type: string; value: string }, extra: Json = {}): Promise<Tokens> {
    const smsBefore = sms.messages.length;
    const mailBefore = mail.received.length;
    const started = await call("POST", "/v1/session/login/otp", { app_id: appId, identifier });
    expect(started.status, JSON.stringify(started.body)).to.equal(200);
    const code =
      identifier.type === "phone_number"
        ? await lastSmsCodeTo(identifier.value, smsBefore)
        : await lastMailCodeTo(identifier.value, mailBefore);
    const checked = await call("POST", "/v1/session/login/otp/check", {
      challenge_token: started.body.challenge_token,
      code,
      ...extra,
    });
    expect(checked.status, JSON.stringify(checked.body)).to.equal(200);
    return checked.body as unknown as Tokens;
  }

  before(async () => {
    expect(
      (await call("POST", `/v2/session/apps/${appId}/config/scopes`, { scope: PWD }, mgmtKey)).status,
    ).to.equal(200);
    const stored = await call("POST", `/v2/session/apps/${appId}/config/stepup`, TWO_ENTRY_CONFIG, mgmtKey);
    expect(stored.status, JSON.stringify(stored.body)).to.equal(201);
    expect(stored.body).to.deep.include({ app_id: appId, jwks_url: "", step_keys: [] });
    const hook = await call(
      "POST",
      `/v2/session/apps/${appId}/webhooks`,
      {
        url: hooks.url,
        events: ["session.created", "scope.granted", "scope.consumed", "password.changed", "session.revoked"],
      },
      mgmtKey,
    );
    expect(hook.status).to.equal(201);
    hookSecret = String(hook.body.secret);
  });
  let hookSecret = "";

  async function stepUp(
    access: string,
    via: "sms" | "email",
    to: string,
  ): Promise<Tokens & { refresh: Tokens }> {
    const smsBefore = sms.messages.length;
    const mailBefore = mail.received.length;
    const asked = await call("POST", "/v1/session/stepup/request", { scope: PWD }, access);
    expect(asked.status, JSON.stringify(asked.body)).to.equal(200);
    expect(asked.body.status).to.equal("review");
    const key = via === "sms" ? "verify_sms" : "verify_email";
    expect(asked.body.steps).to.deep.equal([{ order: 1, key, expiration_duration: 300 }]);
    const code = via === "sms" ? await lastSmsCodeTo(to, smsBefore) : await lastMailCodeTo(to, mailBefore);
    const done = await call("POST", "/v1/session/otp/check", {
      challenge_token: asked.body.challenge_token,
      code,
    });
    expect(done.status, JSON.stringify(done.body)).to.equal(200);
    expect(done.body.current_step).to.equal("completed");
    const refreshed = await call("POST", "/v1/session/refresh", { step_up_token: done.body.challenge_token });
    expect(refreshed.status, JSON.stringify(refreshed.body)).to.equal(200);
    const t = refreshed.body as unknown as Tokens;
    return { ...t, refresh: t };
  }

  describe("the password change of the specification", () => {
    it("lets a phone-only user step up by SMS and change the password once", async () => {
      const phone = freshPhone();
      const session = await login({ type: "phone_number", value: phone });
      expect(session.scope).to.equal("");
      const claims = decodeJwt(session.access_token);
      expect(claims).to.include({ app_id: appId, scope: "" });
      expect(claims.session_id).to.be.a("string");

      const without = await resetPassword({ password: "a new passw0rd" }, session.access_token);
      expect(without.status).to.equal(403);
      expect(without.body).to.include({ code: "insufficient_scope" });
      expect(without.headers.get("www-authenticate")).to.equal(
        `Bearer realm="ringfence", error="insufficient_scope", scope="${PWD}"`,
      );

      const stepped = await stepUp(session.access_token, "sms", phone);
      expect(stepped.scope).to.equal(PWD);
      expect(decodeJwt(stepped.access_token).scope).to.equal(PWD);

      const changed = await resetPassword({ password: "a new passw0rd" }, stepped.access_token);
      expect(changed.status, JSON.stringify(changed.body)).to.equal(204);
      const again = await resetPassword({ password: "another passw0rd" }, stepped.access_token);
      expect(again.status).to.equal(403);
      expect(again.body).to.include({ code: "insufficient_scope" });
    });

    it("gives an email-only user the email step instead", async () => {
      const email = freshEmail();
      const session = await login({ type: "email_address", value: email });
      const stepped = await stepUp(session.access_token, "email", email);
      expect(stepped.scope).to.equal(PWD);
      expect((await resetPassword({ password: "mail-passw0rd" }, stepped.access_token)).status).to.equal(204);
    });

    it("skips the step-up after a login with grant_change_password: true", async () => {
      const session = await login(
        { type: "phone_number", value: freshPhone() },
        { grant_change_password: true },
      );
      expect(session.scope).to.equal(PWD);
      expect((await resetPassword({ password: "direct-passw0rd" }, session.access_token)).status).to.equal(
        204,
      );
      expect((await resetPassword({ password: "direct-passw0rd" }, session.access_token)).status).to.equal(
        403,
      );
    });

    it("lets exactly one of many simultaneous resets with the same token succeed", async () => {
      const session = await login(
        { type: "phone_number", value: freshPhone() },
        { grant_change_password: true },
      );
      const answers = await Promise.all(
        Array.from({ length: 12 }, (_, i) =>
          call(
            "POST",
            "/v1/session/me/password/reset",
            { password: `race-passw0rd-${i}` },
            session.access_token,
          ),
        ),
      );
      const statuses = answers.map((a) => a.status);
      expect(statuses.filter((s) => s === 204)).to.have.length(1);
      expect(statuses.filter((s) => s === 403)).to.have.length(11);
      for (const a of answers.filter((x) => x.status === 403)) {
        expect(a.headers.get("www-authenticate")).to.include('error="insufficient_scope"');
      }
    });

    it("attaches a single-use scope to one access token: a second refresh does not carry it", async () => {
      const phone = freshPhone();
      const session = await login({ type: "phone_number", value: phone });
      const stepped = await stepUp(session.access_token, "sms", phone);
      const next = await call("POST", "/v1/session/refresh", { refresh_token: stepped.refresh_token });
      expect(next.status).to.equal(200);
      expect(next.body.scope).to.equal("");
      const reset = await call(
        "POST",
        "/v1/session/me/password/reset",
        { password: "later-passw0rd" },
        String(next.body.access_token),
      );
      expect(reset.status).to.equal(403);
      expect((await resetPassword({ password: "first-passw0rd" }, stepped.access_token)).status).to.equal(
        204,
      );
    });

    it("refuses a password outside 8 to 128 characters with 400 naming the field, consuming nothing", async () => {
      const session = await login(
        { type: "phone_number", value: freshPhone() },
        { grant_change_password: true },
      );
      for (const password of ["short", "x".repeat(129)]) {
        const r = await resetPassword({ password }, session.access_token);
        expect(r.status).to.equal(400);
        expect(r.body).to.include({ code: "bad_request", field: "password" });
      }
      expect((await resetPassword({ password: "just-right-1" }, session.access_token)).status).to.equal(204);
    });

    it("sends the app's webhooks, signed, for the session and the password change", async () => {
      const session = await login(
        { type: "phone_number", value: freshPhone() },
        { grant_change_password: true },
      );
      const userId = String(decodeJwt(session.access_token).sub);
      await resetPassword({ password: "hooked-passw0rd" }, session.access_token);
      const got = await hooks.until((r) => r.filter((x) => x.body.includes(userId)).length >= 4);
      const mine = got.filter((x) => x.body.includes(userId));
      expect(mine.map((x) => (JSON.parse(x.body) as Json).type)).to.deep.equal([
        "session.created",
        "scope.granted",
        "scope.consumed",
        "password.changed",
      ]);
      for (const d of mine) {
        expect(
          verifyWebhook(
            hookSecret,
            d.body,
            String(d.headers["x-webhook-signature"]),
            300,
            Math.floor(Date.now() / 1000),
          ),
        ).to.equal(true);
      }
    });
  });

  describe("sessions", () => {
    it("creates the user on first login and finds it again on the next", async () => {
      const phone = freshPhone();
      const a = decodeJwt((await login({ type: "phone_number", value: phone })).access_token);
      const b = decodeJwt((await login({ type: "phone_number", value: phone })).access_token);
      expect(a.sub).to.equal(b.sub);
      expect(a.session_id).not.to.equal(b.session_id);
    });

    it("describes the caller at /v1/session/me", async () => {
      const phone = freshPhone();
      const s = await login({ type: "phone_number", value: phone }, { grant_change_password: true });
      const me = await call("GET", "/v1/session/me", undefined, s.access_token);
      expect(me.body).to.deep.equal({
        user_id: decodeJwt(s.access_token).sub,
        identifiers: [{ type: "phone_number", value: phone }],
        scopes: [PWD],
      });
    });

    it("rotates refresh tokens, and a reused one whose successor was used revokes the session at once", async () => {
      const s = await login({ type: "phone_number", value: freshPhone() });
      const first = await call("POST", "/v1/session/refresh", { refresh_token: s.refresh_token });
      expect(first.status).to.equal(200);
      expect(first.body.refresh_token).not.to.equal(s.refresh_token);
      // Its successor used: the grace of a lost answer is over (docs/session-api.md#refresh).
      const second = await call("POST", "/v1/session/refresh", { refresh_token: first.body.refresh_token });
      expect(second.status).to.equal(200);
      const reuse = await call("POST", "/v1/session/refresh", { refresh_token: s.refresh_token });
      expect(reuse.status).to.equal(401);
      expect(reuse.body).to.include({ code: "invalid_token" });
      expect(
        (await call("POST", "/v1/session/refresh", { refresh_token: second.body.refresh_token })).status,
      ).to.equal(401);
      expect(
        (await call("GET", "/v1/session/me", undefined, String(second.body.access_token))).status,
      ).to.equal(401);
    });

    it("ends the session on logout, for tokens already issued too", async () => {
      const s = await login({ type: "email_address", value: freshEmail() });
      expect((await call("POST", "/v1/session/logout", {}, s.access_token)).status).to.equal(204);
      const after = await call("GET", "/v1/session/me", undefined, s.access_token);
      expect(after.status).to.equal(401);
      expect(after.body).to.include({ code: "invalid_token" });
      expect((await call("POST", "/v1/session/refresh", { refresh_token: s.refresh_token })).status).to.equal(
        401,
      );
    });

    it("refuses a wrong code, then too many, and an unknown challenge", async () => {
      const phone = freshPhone();
      const started = await call("POST", "/v1/session/login/otp", {
        app_id: appId,
        identifier: { type: "phone_number", value: phone },
      });
      const token = started.body.challenge_token;
      for (let i = 0; i < 5; i++) {
        const r = await call("POST", "/v1/session/login/otp/check", {
          challenge_token: token,
          code: "000000",
        });
        expect([r.status, r.body.code]).to.deep.equal([400, "invalid_code"]);
      }
      const locked = await call("POST", "/v1/session/login/otp/check", {
        challenge_token: token,
        code: "000000",
      });
      expect([locked.status, locked.body.code]).to.deep.equal([429, "too_many_attempts"]);
      const unknown = await call("POST", "/v1/session/login/otp/check", {
        challenge_token: "lc_nope",
        code: "123456",
      });
      expect([unknown.status, unknown.body.code]).to.deep.equal([400, "expired_challenge"]);
    });

    it("refuses bad login input with 400 naming the field", async () => {
      const cases: [Json, string][] = [
        [
          {
            app_id: "app_missingmissingmissing",
            identifier: { type: "phone_number", value: "+33612345678" },
          },
          "app_id",
        ],
        [{ app_id: appId, identifier: { type: "fax", value: "1" } }, "identifier.type"],
        [{ app_id: appId, identifier: { type: "phone_number", value: "+1555" } }, "identifier.value"],
        [
          { app_id: appId, identifier: { type: "email_address", value: "not-an-address" } },
          "identifier.value",
        ],
      ];
      for (const [body, field] of cases) {
        const r = await call("POST", "/v1/session/login/otp", body);
        expect(r.status).to.equal(400);
        expect(r.body).to.include({ code: "bad_request", field });
      }
    });

    it("answers 401 without a session, and 403 scope_not_allowed for a scope the app did not allow", async () => {
      expect((await call("GET", "/v1/session/me")).status).to.equal(401);
      const s = await login({ type: "phone_number", value: freshPhone() });
      const r = await call("POST", "/v1/session/stepup/request", { scope: "admin:all" }, s.access_token);
      expect([r.status, r.body.code]).to.deep.equal([403, "scope_not_allowed"]);
    });
  });

  describe("token kinds", () => {
    const jwks = () => createRemoteJWKSet(new URL(`${app.config.ISSUER_URL}/.well-known/jwks.json`));

    it("gives a user a session+jwt token that a verifier requiring at+jwt refuses", async () => {
      const s = await login({ type: "phone_number", value: freshPhone() });
      // What a backend checks for a server token: the attacker's OTP login must not pass it.
      const asServerToken = jwtVerify(s.access_token, jwks(), {
        issuer: app.config.ISSUER_URL,
        audience: appId,
        typ: "at+jwt",
      });
      await asServerToken.then(
        () => expect.fail("a session token passed as a server token"),
        (err: unknown) => expect(err).to.have.property("code", "ERR_JWT_CLAIM_VALIDATION_FAILED"),
      );
      const { payload, protectedHeader } = await jwtVerify(s.access_token, jwks(), {
        issuer: app.config.ISSUER_URL,
        audience: appId,
        typ: "session+jwt",
      });
      expect(protectedHeader.typ).to.equal("session+jwt");
      expect(payload).not.to.have.property("client_id");
      expect(Object.keys(payload).sort()).to.deep.equal([
        "acr",
        "amr",
        "app_id",
        "aud",
        "auth_time",
        "exp",
        "iat",
        "iss",
        "jti",
        "scope",
        "session_id",
        "sub",
      ]);
      expect(payload.amr).to.deep.equal(["otp", "sms"]);
      expect(payload.auth_time)
        .to.be.a("number")
        .within((payload.iat ?? 0) - 1, payload.iat ?? 0);
    });

    it("says an emailed code is amr otp, and keeps amr and auth_time across refreshes", async () => {
      const s = await login({ type: "email_address", value: freshEmail() });
      const first = decodeJwt(s.access_token);
      expect(first.amr).to.deep.equal(["otp"]);
      // The next token is issued in a later second, so a refresh that reset auth_time would show.
      const authTime = Number(first.auth_time);
      while (Math.floor(Date.now() / 1000) <= authTime) await new Promise((r) => setTimeout(r, 20));
      const refreshed = await call("POST", "/v1/session/refresh", { refresh_token: s.refresh_token });
      expect(refreshed.status).to.equal(200);
      const token = String(refreshed.body.access_token);
      const next = decodeJwt(token);
      expect(decodeProtectedHeader(token).typ).to.equal("session+jwt");
      expect(next.iat).to.be.greaterThan(authTime);
      expect(next).to.include({ auth_time: authTime, session_id: first.session_id });
      expect(next.amr).to.deep.equal(["otp"]);
      expect(next).not.to.have.property("client_id");
    });

    it("refuses a server token on user calls", async () => {
      const client = await call(
        "POST",
        `/v2/session/apps/${appId}/oauth/clients`,
        {
          client_name: "Backend",
          provider_url: "https://backend.example.com",
          grant_types: ["client_credentials"],
        },
        mgmtKey,
      );
      expect(client.status, JSON.stringify(client.body)).to.equal(201);
      const issued = await rest(app.baseUrl).call("POST", "/v1/session/oauth/token", {
        form: { grant_type: "client_credentials" },
        headers: basicAuth(String(client.body.client_id), String(client.body.client_secret)),
      });
      expect(issued.status).to.equal(200);
      const me = await call("GET", "/v1/session/me", undefined, String(issued.body.access_token));
      expect([me.status, me.body.code]).to.deep.equal([401, "invalid_token"]);
    });
  });

  describe("a password change", () => {
    it("ends the user's other sessions at once, access and refresh tokens, and keeps the one that changed it", async () => {
      const phone = freshPhone();
      const stolen = await login({ type: "phone_number", value: phone });
      const other = await login({ type: "phone_number", value: phone });
      const bystander = await login({ type: "phone_number", value: freshPhone() });
      const changing = await login({ type: "phone_number", value: phone }, { grant_change_password: true });
      expect((await call("GET", "/v1/session/me", undefined, stolen.access_token)).status).to.equal(200);

      const reset = await resetPassword({ password: "fresh-passw0rd" }, changing.access_token);
      expect(reset.status).to.equal(204);

      for (const ended of [stolen, other]) {
        const me = await call("GET", "/v1/session/me", undefined, ended.access_token);
        expect([me.status, me.body.code]).to.deep.equal([401, "invalid_token"]);
        const refreshed = await call("POST", "/v1/session/refresh", { refresh_token: ended.refresh_token });
        expect([refreshed.status, refreshed.body.code]).to.deep.equal([401, "invalid_token"]);
      }
      expect((await call("GET", "/v1/session/me", undefined, changing.access_token)).status).to.equal(200);
      const kept = await call("POST", "/v1/session/refresh", { refresh_token: changing.refresh_token });
      expect(kept.status).to.equal(200);
      expect(
        (await call("GET", "/v1/session/me", undefined, String(kept.body.access_token))).status,
      ).to.equal(200);
      expect((await call("GET", "/v1/session/me", undefined, bystander.access_token)).status).to.equal(200);

      const endedIds = [stolen, other].map((t) => String(decodeJwt(t.access_token).session_id));
      const revoked = (r: typeof hooks.received) =>
        r
          .map((x) => JSON.parse(x.body) as { type: string; payload: Json })
          .filter((e) => e.type === "session.revoked" && e.payload.reason === "password_changed")
          .map((e) => String(e.payload.session_id))
          .filter((id) => endedIds.includes(id));
      await hooks.until((r) => revoked(r).length === 2);
      expect(revoked(hooks.received).sort()).to.deep.equal([...endedIds].sort());
    });

    it("keeps the user's session index to the sessions alive", async () => {
      const phone = freshPhone();
      const a = await login({ type: "phone_number", value: phone });
      const b = await login({ type: "phone_number", value: phone });
      const userId = String(decodeJwt(a.access_token).sub);
      const index = app.registry.keys.key("sessions", userId);
      const ids = [a, b].map((t) => String(decodeJwt(t.access_token).session_id));
      expect((await app.registry.redis.zrange(index, "0", "-1")).sort()).to.deep.equal([...ids].sort());
      expect(await app.registry.redis.pttl(index)).to.be.greaterThan(0);
      expect((await call("POST", "/v1/session/logout", {}, a.access_token)).status).to.equal(204);
      expect(await app.registry.redis.zrange(index, "0", "-1")).to.deep.equal([ids[1]]);
    });
  });

  describe("grant_change_password at login", () => {
    it("grants svc:pwd:write only once the app allows it", async () => {
      const made = JSON.parse(
        (await runCli(["apps", "create", "--name", "Strict"], cliEnv(app.config))).stdout,
      ) as {
        app_id: string;
        management_api_key: string;
      };
      const loginTo = async (phone: string): Promise<Tokens> => {
        const before = sms.messages.length;
        const started = await call("POST", "/v1/session/login/otp", {
          app_id: made.app_id,
          identifier: { type: "phone_number", value: phone },
        });
        expect(started.status).to.equal(200);
        const checked = await call("POST", "/v1/session/login/otp/check", {
          challenge_token: started.body.challenge_token,
          code: await lastSmsCodeTo(phone, before),
          grant_change_password: true,
        });
        expect(checked.status, JSON.stringify(checked.body)).to.equal(200);
        return checked.body as unknown as Tokens;
      };
      const phone = freshPhone();

      const refused = await loginTo(phone);
      expect(refused.scope).to.equal("");
      expect(decodeJwt(refused.access_token).scope).to.equal("");
      const me = await call("GET", "/v1/session/me", undefined, refused.access_token);
      expect(me.body.scopes).to.deep.equal([]);
      const denied = await resetPassword({ password: "sneaky-passw0rd" }, refused.access_token);
      expect([denied.status, denied.body.code]).to.deep.equal([403, "insufficient_scope"]);

      const allowed = await call(
        "POST",
        `/v2/session/apps/${made.app_id}/config/scopes`,
        { scope: PWD },
        made.management_api_key,
      );
      expect(allowed.status).to.equal(200);
      const granted = await loginTo(phone);
      expect(granted.scope).to.equal(PWD);
      expect((await resetPassword({ password: "allowed-passw0rd" }, granted.access_token)).status).to.equal(
        204,
      );
    });
  });

  describe("step-up configuration", () => {
    const invalid: [string, (c: typeof TWO_ENTRY_CONFIG) => unknown, string][] = [
      [
        "empty identifier_types",
        (c) => ((c.allowed_scopes[0]!.direct.identifier_types = []), c),
        "allowed_scopes[0].direct.identifier_types",
      ],
      [
        "an unknown identifier type",
        (c) => ((c.allowed_scopes[0]!.direct.identifier_types = ["username"]), c),
        "allowed_scopes[0].direct.identifier_types[0]",
      ],
      [
        "a repeated (scope, identifier type) pair",
        (c) => {
          const second = c.allowed_scopes[1]!.direct;
          second.identifier_types = ["email_address"];
          second.steps = [{ order: 1, key: "verify_email", expiration_duration: 300 }];
          return c;
        },
        "allowed_scopes[1].direct.identifier_types[0]",
      ],
      [
        "granted_for above 86400",
        (c) => ((c.allowed_scopes[0]!.direct.granted_for = 86_401), c),
        "allowed_scopes[0].direct.granted_for",
      ],
      [
        "a delegated entry without jwks_url",
        (c) => ({
          ...c,
          allowed_scopes: [
            ...c.allowed_scopes,
            { scope: PWD, mode: "delegated", delegated: { url: "https://hook.example.com" } },
          ],
        }),
        "jwks_url",
      ],
      [
        "two delegated entries for one scope",
        (c) => ({
          ...c,
          jwks_url: "https://keys.example.com/jwks.json",
          allowed_scopes: [
            ...c.allowed_scopes,
            { scope: PWD, mode: "delegated", delegated: { url: "https://a.example.com" } },
            { scope: PWD, mode: "delegated", delegated: { url: "https://b.example.com" } },
          ],
        }),
        "allowed_scopes[3]",
      ],
      [
        "a scope the app has not registered",
        (c) => ((c.allowed_scopes[0]!.scope = "svc:other"), c),
        "allowed_scopes[0].scope",
      ],
      [
        "step orders that do not start at 1",
        (c) => ((c.allowed_scopes[0]!.direct.steps[0]!.order = 2), c),
        "allowed_scopes[0].direct.steps[0].order",
      ],
    ];
    for (const [what, change, field] of invalid) {
      it(`refuses ${what} with 400 invalid_stepup_config naming the field, storing nothing`, async () => {
        const config = change(structuredClone(TWO_ENTRY_CONFIG));
        const before = await app.registry.redis.get(app.registry.keys.key("app", appId, "stepup"));
        const r = await call("POST", `/v2/session/apps/${appId}/config/stepup`, config, mgmtKey);
        expect(r.status, JSON.stringify(r.body)).to.equal(400);
        expect(r.body.code).to.equal("invalid_stepup_config");
        expect(String(r.body.field)).to.match(new RegExp(`^${field.replace(/[[\].]/g, "\\$&")}`));
        expect(await app.registry.redis.get(app.registry.keys.key("app", appId, "stepup"))).to.equal(before);
      });
    }

    it("refuses a configuration without the management key", async () => {
      expect(
        (await call("POST", `/v2/session/apps/${appId}/config/stepup`, TWO_ENTRY_CONFIG)).status,
      ).to.equal(401);
    });
  });

  describe("over gRPC", () => {
    it("logs in, steps up by SMS, redeems the step-up token and changes the password", async () => {
      const sessions = new SessionServiceClient(app.grpcAddress, insecure);
      const stepups = new StepUpServiceClient(app.grpcAddress, insecure);
      const phone = freshPhone();
      let before = sms.messages.length;
      const started = await unary(sessions.startOtpLogin.bind(sessions), {
        appId,
        identifier: { type: "phone_number", value: phone },
      });
      const code = await lastSmsCodeTo(phone, before);
      const logged = await unary(sessions.checkOtpLogin.bind(sessions), {
        challengeToken: started.res?.challengeToken ?? "",
        code,
      });
      expect(logged.err).to.equal(null);
      const bearer = metadata({ authorization: `Bearer ${logged.res?.accessToken ?? ""}` });
      before = sms.messages.length;
      const asked = await unary(
        stepups.requestStepUp.bind(stepups),
        { scope: PWD, metadata: undefined, acrValues: "", maxAge: undefined },
        bearer,
      );
      expect(asked.res?.status).to.equal("review");
      const stepCode = await lastSmsCodeTo(phone, before);
      const done = await unary(stepups.checkStepUpOtp.bind(stepups), {
        challengeToken: asked.res?.challengeToken ?? "",
        code: stepCode,
      });
      expect(done.res?.currentStep).to.equal("completed");
      const refreshed = await unary(sessions.refreshSession.bind(sessions), {
        refreshToken: "",
        stepUpToken: done.res?.challengeToken ?? "",
      });
      expect(refreshed.res?.scope).to.equal(PWD);
      const withScope = metadata({ authorization: `Bearer ${refreshed.res?.accessToken ?? ""}` });
      const reset = await unary(
        stepups.resetPassword.bind(stepups),
        { password: "grpc-passw0rd" },
        withScope,
      );
      expect(reset.err).to.equal(null);
      const again = await unary(
        stepups.resetPassword.bind(stepups),
        { password: "grpc-passw0rd" },
        withScope,
      );
      expect(again.err?.code).to.equal(status.PERMISSION_DENIED);
      expect(again.err?.metadata.get("x-http-status")).to.deep.equal(["403"]);
      sessions.close();
      stepups.close();
    });
  });

  describe("ringfence users create", () => {
    it("makes a user that logs in with its identifiers, and refuses a taken one", async () => {
      const email = freshEmail();
      const r = await runCli(
        ["users", "create", "--app", appId, "--email", email, "--password", "initial-passw0rd"],
        cliEnv(app.config),
      );
      expect(r.code, r.stderr).to.equal(0);
      const { user_id: userId } = JSON.parse(r.stdout) as { user_id: string };
      const s = await login({ type: "email_address", value: email });
      expect(decodeJwt(s.access_token).sub).to.equal(userId);
      const dup = await runCli(["users", "create", "--app", appId, "--email", email], cliEnv(app.config));
      expect(dup.code).to.equal(2);
      const stored = await app.registry.redis.hget(app.registry.keys.key("user", userId), "password_hash");
      expect(stored).to.match(/^\$argon2id\$/);
    });
  });
});
