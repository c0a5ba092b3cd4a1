import { sample } from "../support/metrics.js";
import { expect } from "chai";
import { status } from "@grpc/grpc-js";
import { createRemoteJWKSet, decodeJwt, jwtVerify } from "jose";
import { SessionServiceClient } from "../../src/gen/ringfence/session/v1/session_service.js";
import { PasswordChecker } from "../../src/session/password-login.js";
import { hashPassword } from "../../src/session/password.js";
import { cliEnv, insecure, runCli, startTestApp, unary, type TestApp } from "../support/app.js";
import { Receiver } from "../support/receivers.js";
import { rest, type Json, type RestAnswer } from "../support/rest.js";
import { PWD } from "../support/stepup.js";
import { testCall } from "../support/call.js";

/**
 * Password login (docs/session-api.md#password-login): the OTP login's answer with amr ["pwd"],
 * one 401 for a wrong password, an unknown identifier and a user without a password, and the
 * two failure windows, PASSWORD_FAILURES_IDENTIFIER and PASSWORD_FAILURES_IP, that refuse every
 * attempt while full.
 */

const PASSWORD = "correct horse battery";

class Rig {
  private phoneSeq = 612_700_000;
  private constructor(
    readonly app: TestApp,
    readonly appId: string,
    readonly mgmtKey: string,
  ) {}

  static async start(env: Record<string, string>): Promise<Rig> {
    const app = await startTestApp(env);
    const made = await runCli(["apps", "create", "--name", "Shop"], cliEnv(app.config));
    const { app_id: appId, management_api_key: mgmtKey } = JSON.parse(made.stdout) as Record<string, string>;
    return new Rig(app, appId ?? "", mgmtKey ?? "");
  }

  freshPhone(): string {
    return `+33${(this.phoneSeq += 1000)}`;
  }

  /** A user of the app holding `phone`, with `password` unless null (as the CLI stores one). */
  async user(phone: string, password: string | null = PASSWORD): Promise<string> {
    const hash = password === null ? undefined : await hashPassword(password);
    const user = await this.app.registry.users.create(
      this.appId,
      [{ type: "phone_number", value: phone }],
      hash,
    );
    if (user === undefined) throw new Error(`${phone} is taken`);
    return user.userId;
  }

  login(body: unknown): Promise<RestAnswer> {
    return rest(this.app.baseUrl).call("POST", "/v1/session/login/password", { body });
  }

  loginPhone(phone: string, password: string, appId = this.appId): Promise<RestAnswer> {
    return this.login({ app_id: appId, identifier: { type: "phone_number", value: phone }, password });
  }

  async metrics(): Promise<string> {
    return (await this.app.registry.metrics.exposition()).body;
  }

  stop(): Promise<boolean> {
    return this.app.stop();
  }
}

/** A 429 of a failure window: `too_many_attempts` with a Retry-After within the window. */
function expectWindowRefusal(r: RestAnswer, windowSeconds: number): void {
  expect(r.status, r.text).to.equal(429);
  expect(r.body.code).to.equal("too_many_attempts");
  const retryAfter = Number(r.headers.get("retry-after"));
  expect(retryAfter).to.be.within(1, windowSeconds);
}

describe("password login", () => {
  describe("answers", () => {
    let rig: Rig;
    let mail: Receiver;
    let hooks: Receiver;
    before(async function () {
      this.timeout(30_000);
      mail = await Receiver.start();
      hooks = await Receiver.start();
      rig = await Rig.start({
        EMAIL_PROVIDER: "http",
        EMAIL_HTTP_URL: mail.url,
        WEBHOOK_BACKOFF_BASE_MS: "50",
      });
      const hook = await rest(rig.app.baseUrl).call("POST", `/v2/session/apps/${rig.appId}/webhooks`, {
        body: { url: hooks.url, events: ["session.created"] },
        bearer: rig.mgmtKey,
      });
      expect(hook.status, hook.text).to.equal(201);
    });
    after(async () => {
      await rig.stop();
      await mail.close();
      await hooks.close();
    });

    it("logs in a user the CLI created with a password: a session+jwt token with amr pwd and auth_time", async function () {
      this.timeout(20_000);
      const phone = rig.freshPhone();
      const made = await runCli(
        ["users", "create", "--app", rig.appId, "--phone", phone, "--password", PASSWORD],
        cliEnv(rig.app.config),
      );
      expect(made.code, made.stderr).to.equal(0);
      const { user_id: userId } = JSON.parse(made.stdout) as { user_id: string };
      const before = Math.floor(Date.now() / 1000);
      const r = await rig.loginPhone(phone, PASSWORD);
      expect(r.status, r.text).to.equal(200);
      expect(r.headers.get("cache-control")).to.equal("no-store");
      expect(Object.keys(r.body).sort()).to.deep.equal([
        "access_token",
        "expires_in",
        "refresh_token",
        "scope",
      ]);
      expect(r.body.scope).to.equal("");
      const issuer = rig.app.config.ISSUER_URL;
      const { payload, protectedHeader } = await jwtVerify(
        String(r.body.access_token),
        createRemoteJWKSet(new URL(`${issuer}/.well-known/jwks.json`)),
        { issuer, audience: rig.appId, typ: "session+jwt" },
      );
      expect(protectedHeader.typ).to.equal("session+jwt");
      expect(payload.sub).to.equal(userId);
      expect(payload.amr).to.deep.equal(["pwd"]);
      expect(payload.auth_time).to.be.within(before, Math.floor(Date.now() / 1000));
      expect(payload).not.to.have.property("client_id");

      // The session is a real one: GET /v1/session/me, and a refresh keeps amr and auth_time.
      const me = await rest(rig.app.baseUrl).call("GET", "/v1/session/me", {
        bearer: String(r.body.access_token),
      });
      expect([me.status, me.body.user_id]).to.deep.equal([200, userId]);
      const refreshed = await rest(rig.app.baseUrl).post("/v1/session/refresh", {
        refresh_token: r.body.refresh_token,
      });
      expect(refreshed.status, refreshed.text).to.equal(200);
      const again = decodeJwt(String(refreshed.body.access_token));
      expect([again.amr, again.auth_time]).to.deep.equal([["pwd"], payload.auth_time]);

      // The app hears of the session as of an OTP login's.
      const got = await hooks.until((rs) => rs.some((x) => x.body.includes(String(payload.session_id))));
      const event = JSON.parse(
        got.find((x) => x.body.includes(String(payload.session_id)))?.body ?? "{}",
      ) as Json;
      expect(event.type).to.equal("session.created");
      expect(event.payload).to.deep.include({
        user_id: userId,
        session_id: payload.session_id,
        new_user: false,
      });
    });

    it("logs in with a password set by the password change, given in another Unicode form, the email in any case", async function () {
      this.timeout(20_000);
      const api = rest(rig.app.baseUrl);
      expect(
        (
          await api.call("POST", `/v2/session/apps/${rig.appId}/config/scopes`, {
            body: { scope: PWD },
            bearer: rig.mgmtKey,
          })
        ).status,
      ).to.equal(200);
      const email = "changer@example.com";
      const before = mail.received.length;
      const started = await api.post("/v1/session/login/otp", {
        app_id: rig.appId,
        identifier: { type: "email_address", value: email },
      });
      expect(started.status, started.text).to.equal(200);
      await mail.until((rs) => rs.slice(before).some((x) => x.body.includes(email)));
      const sent = mail.received.slice(before).find((x) => x.body.includes(email));
      const code = /\b(\d{6})\b/.exec((JSON.parse(sent?.body ?? "{}") as { body: string }).body)?.[1];
      const session = await api.post("/v1/session/login/otp/check", {
        challenge_token: started.body.challenge_token,
        code,
        grant_change_password: true,
      });
      expect(session.status, session.text).to.equal(200);
      const changed = await api.call("POST", "/v1/session/me/password/reset", {
        body: { password: "Chang\u0065\u0301d passw0rd" },
        bearer: String(session.body.access_token),
      });
      expect(changed.status, changed.text).to.equal(204);
      const login = (password: string) =>
        rig.login({
          app_id: rig.appId,
          identifier: { type: "email_address", value: "Changer@Example.com" },
          password,
        });
      // The same password in another Unicode form (NFKC, as it was stored) and the email in any case.
      const r = await login("Chang\u00e9d passw0rd");
      expect(r.status, r.text).to.equal(200);
      expect(decodeJwt(String(r.body.access_token)).sub).to.equal(
        decodeJwt(String(session.body.access_token)).sub,
      );
      expect((await login("Changed passw0rd")).status).to.equal(401);
    });

    it("answers a wrong password, an unknown identifier and a user without a password with the same 401", async () => {
      const withPassword = rig.freshPhone();
      await rig.user(withPassword);
      const withoutPassword = rig.freshPhone();
      await rig.user(withoutPassword, null);
      const answers = [
        await rig.loginPhone(withPassword, "not the password"),
        await rig.loginPhone(rig.freshPhone(), PASSWORD),
        await rig.loginPhone(withoutPassword, PASSWORD),
      ];
      for (const a of answers) {
        expect(a.status).to.equal(401);
        expect(a.text).to.equal(answers[0]?.text);
        expect(a.headers.get("content-type")).to.equal(answers[0]?.headers.get("content-type"));
        expect(a.headers.get("www-authenticate")).to.equal(null);
      }
      expect(JSON.parse(answers[0]?.text ?? "")).to.deep.equal({
        code: "invalid_credentials",
        message: "the identifier or the password is wrong",
      });
    });

    it("answers gRPC callers UNAUTHENTICATED for a wrong password, and the tokens for a right one", async () => {
      const phone = rig.freshPhone();
      await rig.user(phone);
      const client = new SessionServiceClient(rig.app.grpcAddress, insecure);
      try {
        const login = (password: string) =>
          unary(client.loginWithPassword.bind(client), {
            appId: rig.appId,
            identifier: { type: "phone_number", value: phone },
            password,
          });
        const wrong = await login("not the password");
        expect([wrong.err?.code, wrong.err?.details]).to.deep.equal([
          status.UNAUTHENTICATED,
          "the identifier or the password is wrong",
        ]);
        const right = await login(PASSWORD);
        expect(right.err).to.equal(null);
        expect(decodeJwt(right.res?.accessToken ?? "").amr).to.deep.equal(["pwd"]);
      } finally {
        client.close();
      }
    });

    it("answers a user of another app as an unknown identifier", async () => {
      const phone = rig.freshPhone();
      await rig.user(phone);
      const other = await runCli(["apps", "create", "--name", "Other"], cliEnv(rig.app.config));
      const { app_id: otherApp } = JSON.parse(other.stdout) as { app_id: string };
      const r = await rig.loginPhone(phone, PASSWORD, otherApp);
      expect([r.status, r.body.code]).to.deep.equal([401, "invalid_credentials"]);
    });

    it("refuses bad input with 400 naming the field", async () => {
      const phone = rig.freshPhone();
      await rig.user(phone);
      const identifier = { type: "phone_number", value: phone };
      const cases: [unknown, string][] = [
        [{ identifier, password: PASSWORD }, "app_id"],
        [{ app_id: rig.appId, password: PASSWORD }, "identifier"],
        [
          { app_id: rig.appId, identifier: { type: "username", value: "bob" }, password: PASSWORD },
          "identifier.type",
        ],
        [
          { app_id: rig.appId, identifier: { type: "phone_number", value: "12" }, password: PASSWORD },
          "identifier.value",
        ],
        [{ app_id: rig.appId, identifier }, "password"],
        [{ app_id: rig.appId, identifier, password: "" }, "password"],
        [{ app_id: rig.appId, identifier, password: "x".repeat(129) }, "password"],
        [{ app_id: "app_unknown", identifier, password: PASSWORD }, "app_id"],
      ];
      for (const [body, field] of cases) {
        const r = await rig.login(body);
        expect([r.status, r.body.code, r.body.field], JSON.stringify(body)).to.deep.equal([
          400,
          "bad_request",
          field,
        ]);
      }
      expect((await rig.loginPhone(phone, PASSWORD)).status).to.equal(200);
    });

    it("checks passwords off the event loop: the loop turns while a verification runs", async () => {
      const passwordHash = await hashPassword(PASSWORD);
      const user = { userId: "usr_0000000000000000000000", appId: "app", identifiers: [], hasPassword: true };
      const checker = new PasswordChecker({ credentials: () => Promise.resolve({ user, passwordHash }) });
      for (const password of [PASSWORD, "not the password"]) {
        let turns = 0;
        let checking = true;
        const spin = () => {
          if (!checking) return;
          turns++;
          setImmediate(spin);
        };
        setImmediate(spin);
        // A synchronous verification would answer before the first turn of the loop.
        const found = await checker.check(
          "app",
          { type: "phone_number", value: "+33612000000" },
          password,
          testCall(),
        );
        checking = false;
        expect(found?.userId).to.equal(password === PASSWORD ? user.userId : undefined);
        expect(turns).to.be.greaterThan(0);
      }
    });

    it("serves concurrent logins and other calls together", async function () {
      this.timeout(20_000);
      const phones = [rig.freshPhone(), rig.freshPhone(), rig.freshPhone(), rig.freshPhone()];
      await Promise.all(phones.map((p) => rig.user(p)));
      const [jwks, ...logins] = await Promise.all([
        rest(rig.app.baseUrl).get("/.well-known/jwks.json"),
        ...phones.map((p, i) => rig.loginPhone(p, i % 2 === 0 ? PASSWORD : "not the password")),
      ]);
      expect(jwks.status).to.equal(200);
      expect(logins.map((r) => r.status)).to.deep.equal([200, 401, 200, 401]);
    });
  });

  describe("PASSWORD_FAILURES_IDENTIFIER", () => {
    let rig: Rig;
    before(async function () {
      this.timeout(30_000);
      rig = await Rig.start({ PASSWORD_FAILURES_IDENTIFIER: "10/900", PASSWORD_FAILURES_IP: "off" });
    });
    after(() => rig.stop());

    it("refuses every attempt after 10 failures of one identifier, the right password included", async function () {
      this.timeout(30_000);
      const phone = rig.freshPhone();
      await rig.user(phone);
      const metricsBefore = await rig.metrics();
      for (let i = 0; i < 10; i++)
        expect((await rig.loginPhone(phone, `wrong guess ${i}`)).status).to.equal(401);
      expectWindowRefusal(await rig.loginPhone(phone, "wrong guess 10"), 900);
      expectWindowRefusal(await rig.loginPhone(phone, PASSWORD), 900);
      const metrics = await rig.metrics();
      const grew = (name: string, labels: Record<string, string>) =>
        sample(metrics, name, labels) - sample(metricsBefore, name, labels);
      expect(grew("ringfence_abuse_refusals_total", { rule: "PASSWORD_FAILURES_IDENTIFIER" })).to.equal(2);
      expect(grew("ringfence_password_logins_total", { outcome: "too_many_attempts" })).to.equal(2);
      expect(grew("ringfence_password_logins_total", { outcome: "invalid_credentials" })).to.equal(10);
      expect(grew("ringfence_password_logins_total", { outcome: "success" })).to.equal(0);

      // The window is this identifier's: another user of the app still logs in.
      const other = rig.freshPhone();
      await rig.user(other);
      expect((await rig.loginPhone(other, PASSWORD)).status).to.equal(200);
    });

    it("counts unknown identifiers too, whatever the case of an email", async function () {
      this.timeout(30_000);
      const login = (value: string) =>
        rig.login({ app_id: rig.appId, identifier: { type: "email_address", value }, password: PASSWORD });
      for (let i = 0; i < 10; i++) {
        expect((await login(i % 2 === 0 ? "nobody@example.com" : "NoBody@Example.com")).status).to.equal(401);
      }
      expectWindowRefusal(await login("nobody@example.com"), 900);
    });

    it("takes no place for a right password, nor for bad input", async function () {
      this.timeout(30_000);
      const phone = rig.freshPhone();
      await rig.user(phone);
      const identifier = { type: "phone_number", value: phone };
      // A right password first: from then on this address is a known source of the identifier,
      // and every attempt below counts in its own window (docs/session-api.md#known-sources).
      expect((await rig.loginPhone(phone, PASSWORD)).status).to.equal(200);
      for (let i = 0; i < 12; i++) {
        const r = await rig.login({ app_id: rig.appId, identifier, password: "" });
        expect(r.status).to.equal(400);
      }
      for (let i = 0; i < 9; i++)
        expect((await rig.loginPhone(phone, `wrong guess ${i}`)).status).to.equal(401);
      for (let i = 0; i < 3; i++) expect((await rig.loginPhone(phone, PASSWORD)).status).to.equal(200);
      expect((await rig.loginPhone(phone, "wrong guess 9")).status).to.equal(401);
      expectWindowRefusal(await rig.loginPhone(phone, PASSWORD), 900);
    });

    it("lets exactly 10 of 20 concurrent wrong passwords be checked", async function () {
      this.timeout(60_000);
      const phone = rig.freshPhone();
      await rig.user(phone);
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, i) => rig.loginPhone(phone, `wrong guess ${i}`)),
      );
      const statuses = answers.map((r) => r.status);
      expect(statuses.filter((s) => s === 401)).to.have.length(10);
      expect(statuses.filter((s) => s === 429)).to.have.length(10);
    });
  });

  describe("PASSWORD_FAILURES_IP", () => {
    let rig: Rig;
    before(async function () {
      this.timeout(30_000);
      rig = await Rig.start({ PASSWORD_FAILURES_IDENTIFIER: "off", PASSWORD_FAILURES_IP: "4/300" });
    });
    after(() => rig.stop());

    it("refuses every attempt from an address after its failures fill the window, across identifiers and apps", async function () {
      this.timeout(30_000);
      const phone = rig.freshPhone();
      await rig.user(phone);
      const metricsBefore = await rig.metrics();
      for (let i = 0; i < 4; i++)
        expect((await rig.loginPhone(rig.freshPhone(), PASSWORD)).status).to.equal(401);
      expectWindowRefusal(await rig.loginPhone(phone, PASSWORD), 300);
      const other = await runCli(["apps", "create", "--name", "Other"], cliEnv(rig.app.config));
      const { app_id: otherApp } = JSON.parse(other.stdout) as { app_id: string };
      expectWindowRefusal(await rig.loginPhone(rig.freshPhone(), PASSWORD, otherApp), 300);
      const metrics = await rig.metrics();
      expect(
        sample(metrics, "ringfence_abuse_refusals_total", { rule: "PASSWORD_FAILURES_IP" }) -
          sample(metricsBefore, "ringfence_abuse_refusals_total", { rule: "PASSWORD_FAILURES_IP" }),
      ).to.equal(2);
    });
  });
});
