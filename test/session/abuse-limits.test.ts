import { expect } from "chai";
import { status } from "@grpc/grpc-js";
import { SessionServiceClient } from "../../src/gen/ringfence/session/v1/session_service.js";
import { LookupServiceClient } from "../../src/gen/ringfence/lookup/v2/lookup_service.js";
import { OAuthServiceClient } from "../../src/gen/ringfence/oauth/v1/oauth_service.js";
import { loadConfig, ConfigError } from "../../src/config.js";
import { cliEnv, insecure, metadata, runCli, startTestApp, unary, type TestApp } from "../support/app.js";
import { basicAuth, callFrom, rest, type Json } from "../support/rest.js";
import { Receiver, SmsReceiver } from "../support/receivers.js";
import { PWD, reviewEntry } from "../support/stepup.js";
import { Keys } from "../../src/redis/client.js";
import { sample } from "../support/metrics.js";

const FR_PREMIUM = "+33891234567";

const PHONE_STEP_UP = {
  jwks_url: "",
  step_keys: [],
  allowed_scopes: [reviewEntry("phone_number", "verify_sms")],
};

/** One service with its SMS and email receivers, an app with the phone step-up configuration. */
class Rig {
  private constructor(
    readonly app: TestApp,
    readonly sms: SmsReceiver,
    readonly mail: Receiver,
    readonly appId: string,
    readonly mgmtKey: string,
  ) {}

  static async start(env: Record<string, string>): Promise<Rig> {
    const sms = await SmsReceiver.start();
    const mail = await Receiver.start();
    const app = await startTestApp({
      SMS_PROVIDER: "http",
      SMS_HTTP_URL: sms.url,
      EMAIL_PROVIDER: "http",
      EMAIL_HTTP_URL: mail.url,
      ...env,
    });
    const made = await runCli(["apps", "create", "--name", "Shop"], cliEnv(app.config));
    const { app_id: appId, management_api_key: mgmtKey } = JSON.parse(made.stdout) as Record<string, string>;
    const rig = new Rig(app, sms, mail, appId ?? "", mgmtKey ?? "");
    expect(
      (await rig.call("POST", `/v2/session/apps/${rig.appId}/config/scopes`, { scope: PWD }, mgmtKey)).status,
    ).to.equal(200);
    expect(
      (await rig.call("POST", `/v2/session/apps/${rig.appId}/config/stepup`, PHONE_STEP_UP, mgmtKey)).status,
    ).to.equal(201);
    return rig;
  }

  async stop(): Promise<void> {
    await this.app.stop();
    await this.sms.close();
    await this.mail.close();
  }

  call(method: string, path: string, body?: unknown, bearer?: string) {
    return rest(this.app.baseUrl).call(method, path, { body, bearer });
  }

  smsTo(phone: string): number {
    return this.sms.messages.filter((m) => m.to === phone).length;
  }

  /** The emails sent to `email`, as the provider received them. */
  mailsTo(email: string): { to: string; body: string }[] {
    return this.mail.received
      .map((r) => JSON.parse(r.body) as { to: string; body: string })
      .filter((m) => m.to === email);
  }

  /** The code of the nth email (0-based) to `email`, once it has arrived. */
  async mailCodeTo(email: string, nth: number): Promise<string> {
    await this.mail.until(() => this.mailsTo(email).length > nth);
    const code = /\b(\d{6})\b/.exec(this.mailsTo(email)[nth]?.body ?? "")?.[1];
    if (code === undefined) throw new Error(`no code in email ${nth} to ${email}`);
    return code;
  }

  async codeTo(phone: string, nth: number): Promise<string> {
    await this.sms.receiver.until(() => this.smsTo(phone) > nth);
    const m = this.sms.messages.filter((x) => x.to === phone)[nth];
    if (m === undefined) throw new Error("no message");
    return SmsReceiver.code(m);
  }

  /** Logs in by SMS; resolves the session's tokens. */
  async login(phone: string): Promise<{ access_token: string; refresh_token: string }> {
    const before = this.smsTo(phone);
    const started = await this.call("POST", "/v1/session/login/otp", {
      app_id: this.appId,
      identifier: { type: "phone_number", value: phone },
    });
    expect(started.status, JSON.stringify(started.body)).to.equal(200);
    const code = await this.codeTo(phone, before);
    const checked = await this.call("POST", "/v1/session/login/otp/check", {
      challenge_token: started.body.challenge_token,
      code,
    });
    expect(checked.status, JSON.stringify(checked.body)).to.equal(200);
    return checked.body as { access_token: string; refresh_token: string };
  }
}

/** A code of `length` digits that is not `avoid`, the n-th such guess. */
function wrongGuess(n: number, avoid: string): string {
  let g = n;
  for (;;) {
    const s = String(g).padStart(avoid.length, "0");
    if (s !== avoid) return s;
    g += 1;
  }
}

function expect429(r: { status: number; headers: Headers; body: Json }, what: string): void {
  expect(r.status, `${what}: ${JSON.stringify(r.body)}`).to.equal(429);
  expect(r.body.code).to.equal("too_many_attempts");
  expect(Number(r.headers.get("retry-after"))).to.be.within(1, 3600);
}

describe("abuse limits of the session service", () => {
  describe("step-up brute force (STEPUP_LIMIT_USER, OTP_CHECK_LIMIT)", () => {
    let rig: Rig;
    before(async function () {
      this.timeout(30_000);
      rig = await Rig.start({
        OTP_LENGTH: "4",
        STEPUP_LIMIT_USER: "3/3600",
        OTP_CHECK_LIMIT: "6/900",
      });
    });
    after(async () => rig.stop());

    it("stops a stolen token's brute force at the limits: few SMS, few guesses, the password unchanged", async function () {
      this.timeout(60_000);
      const phone = "+33612990001";
      const { registry } = rig.app;
      const made = await runCli(
        ["users", "create", "--app", rig.appId, "--phone", phone, "--password", "old-password-1"],
        cliEnv(rig.app.config),
      );
      const { user_id: userId } = JSON.parse(made.stdout) as { user_id: string };
      const userKey = registry.keys.key("user", userId);
      const hashBefore = await registry.redis.hget(userKey, "password_hash");
      expect(hashBefore).to.be.a("string");
      const { access_token: token } = await rig.login(phone);
      const smsAfterLogin = rig.smsTo(phone);

      let challenges = 0;
      let guesses = 0;
      let refusedRequests = 0;
      let refusedChecks = 0;
      let n = 0;
      // The attacker tries 40 challenges with 5 guesses each: 200 guesses would be 2% of a 4-digit space.
      for (let round = 0; round < 40; round++) {
        const asked = await rig.call("POST", "/v1/session/stepup/request", { scope: PWD }, token);
        if (asked.status === 429) {
          expect429(asked, "step-up request");
          refusedRequests++;
          continue;
        }
        expect(asked.status, JSON.stringify(asked.body)).to.equal(200);
        expect(asked.body.status).to.equal("review");
        challenges++;
        const real = await rig.codeTo(phone, smsAfterLogin + challenges - 1);
        for (let i = 0; i < 5; i++) {
          const checked = await rig.call("POST", "/v1/session/otp/check", {
            challenge_token: asked.body.challenge_token,
            code: wrongGuess(n++, real),
          });
          if (checked.status === 429) {
            expect429(checked, "code check");
            refusedChecks++;
            break;
          }
          expect(checked.status, JSON.stringify(checked.body)).to.equal(400);
          expect(checked.body.code).to.equal("invalid_code");
          guesses++;
        }
      }
      expect(challenges, "challenges opened").to.equal(3);
      expect(rig.smsTo(phone) - smsAfterLogin, "SMS to the victim").to.equal(3);
      expect(guesses, "codes compared").to.equal(6);
      expect(refusedRequests).to.equal(37);
      expect(refusedChecks).to.be.greaterThan(0);

      const reset = await rig.call(
        "POST",
        "/v1/session/me/password/reset",
        { password: "attacker-pass-9" },
        token,
      );
      expect(reset.status).to.equal(403);
      expect(reset.body.code).to.equal("insufficient_scope");
      expect(await registry.redis.hget(userKey, "password_hash")).to.equal(hashBefore);
    });

    it("refuses the right code too once the user's checks are used up, across challenges", async function () {
      this.timeout(30_000);
      const phone = "+33612990002";
      const { access_token: token } = await rig.login(phone);
      const base = rig.smsTo(phone);
      // Two challenges: 4 wrong checks in the first, 2 in the second use the 6 of the window.
      const first = await rig.call("POST", "/v1/session/stepup/request", { scope: PWD }, token);
      const real1 = await rig.codeTo(phone, base);
      for (let i = 0; i < 4; i++) {
        const r = await rig.call("POST", "/v1/session/otp/check", {
          challenge_token: first.body.challenge_token,
          code: wrongGuess(i, real1),
        });
        expect(r.status).to.equal(400);
      }
      const second = await rig.call("POST", "/v1/session/stepup/request", { scope: PWD }, token);
      const real2 = await rig.codeTo(phone, base + 1);
      for (let i = 0; i < 2; i++) {
        const r = await rig.call("POST", "/v1/session/otp/check", {
          challenge_token: second.body.challenge_token,
          code: wrongGuess(i, real2),
        });
        expect(r.status).to.equal(400);
      }
      const right = await rig.call("POST", "/v1/session/otp/check", {
        challenge_token: second.body.challenge_token,
        code: real2,
      });
      expect429(right, "the right code after the window is full");
    });
  });

  describe("step-up per session (STEPUP_LIMIT_SESSION)", () => {
    let rig: Rig;
    before(async function () {
      this.timeout(30_000);
      rig = await Rig.start({ STEPUP_LIMIT_SESSION: "2/900" });
    });
    after(async () => rig.stop());

    it("allows each session its own few challenges", async function () {
      this.timeout(30_000);
      const phone = "+33612990003";
      const one = await rig.login(phone);
      for (let i = 0; i < 2; i++) {
        expect(
          (await rig.call("POST", "/v1/session/stepup/request", { scope: PWD }, one.access_token)).status,
        ).to.equal(200);
      }
      expect429(
        await rig.call("POST", "/v1/session/stepup/request", { scope: PWD }, one.access_token),
        "third in one session",
      );
      const two = await rig.login(phone);
      expect(
        (await rig.call("POST", "/v1/session/stepup/request", { scope: PWD }, two.access_token)).status,
      ).to.equal(200);
    });
  });

  describe("logins (LOGIN_LIMIT_IP, LOGIN_LIMIT_APP, spam rules)", () => {
    let rig: Rig;
    before(async function () {
      this.timeout(30_000);
      rig = await Rig.start({ LOGIN_LIMIT_IP: "10/3600", LOGIN_LIMIT_APP: "off" });
    });
    after(async () => rig.stop());

    it("sends at most LOGIN_LIMIT_IP codes for 300 login requests from one address", async function () {
      this.timeout(60_000);
      const before = rig.sms.messages.length;
      const answers: { status: number; retryAfter: string | null; code: unknown }[] = [];
      for (let batch = 0; batch < 30; batch++) {
        answers.push(
          ...(await Promise.all(
            Array.from({ length: 10 }, async (_, i) => {
              const r = await rig.call("POST", "/v1/session/login/otp", {
                app_id: rig.appId,
                // A range of its own for each (SPAM_RANGE_BURST would call 300 neighbours spam).
                identifier: {
                  type: "phone_number",
                  value: `+336${String(batch * 10 + i).padStart(3, "0")}12345`,
                },
              });
              return { status: r.status, retryAfter: r.headers.get("retry-after"), code: r.body.code };
            }),
          )),
        );
      }
      expect(answers.filter((a) => a.status === 200)).to.have.length(10);
      const refused = answers.filter((a) => a.status !== 200);
      expect(refused).to.have.length(290);
      for (const a of refused) {
        expect(a.status).to.equal(429);
        expect(a.code).to.equal("too_many_attempts");
        expect(Number(a.retryAfter)).to.be.within(1, 3600);
      }
      await rig.sms.receiver.until((r) => r.length >= before + 10);
      await new Promise((r) => setTimeout(r, 200));
      expect(rig.sms.messages.length - before).to.equal(10);
    });

    it("refuses the 11th login code into one number range with 403 spam_detected (SPAM_RANGE_BURST)", async function () {
      this.timeout(30_000);
      const burst = await Rig.start({ LOGIN_LIMIT_IP: "off" });
      try {
        const answers = [];
        for (let i = 0; i < 12; i++) {
          answers.push(
            await burst.call("POST", "/v1/session/login/otp", {
              app_id: burst.appId,
              identifier: { type: "phone_number", value: `+3361555${String(i).padStart(4, "0")}` },
            }),
          );
        }
        expect(answers.map((a) => a.status)).to.deep.equal([...Array<number>(10).fill(200), 403, 403]);
        expect(answers[10]?.body.code).to.equal("spam_detected");
        await burst.sms.receiver.until((r) => r.length >= 10);
        await new Promise((r) => setTimeout(r, 200));
        expect(burst.sms.messages).to.have.length(10);
      } finally {
        await burst.stop();
      }
    });

    it("refuses premium-rate numbers with 403 spam_detected and sends nothing", async () => {
      const before = rig.sms.messages.length;
      const r = await rig.call("POST", "/v1/session/login/otp", {
        app_id: rig.appId,
        identifier: { type: "phone_number", value: FR_PREMIUM },
      });
      expect(r.status).to.equal(403);
      expect(r.body).to.deep.equal({ code: "spam_detected", message: "codes are not sent to this number" });
      expect(rig.sms.messages.length).to.equal(before);
    });
  });

  describe("the client address", () => {
    let rig: Rig;
    let untrusted: Rig;
    before(async function () {
      this.timeout(30_000);
      // The proxy case: this rig's gRPC peers (the tests, on loopback) stand for Envoy.
      rig = await Rig.start({
        LOGIN_LIMIT_IP: "2/3600",
        LOGIN_LIMIT_APP: "5/3600",
        TRUSTED_PROXY_CIDRS: "127.0.0.0/8,::1/128",
      });
      untrusted = await Rig.start({ LOGIN_LIMIT_IP: "2/3600", TRUSTED_PROXY_CIDRS: "10.0.0.0/8" });
    });
    after(async () => {
      await rig.stop();
      await untrusted.stop();
    });

    const grpcLogin = (r: Rig, i: number, forwardedFor: string) => {
      const client = new SessionServiceClient(r.app.grpcAddress, insecure);
      return unary(
        client.startOtpLogin.bind(client),
        {
          appId: r.appId,
          identifier: { type: "phone_number", value: `+3361400${String(i).padStart(4, "0")}` },
        },
        metadata({ "x-forwarded-for": forwardedFor }),
      ).finally(() => {
        client.close();
      });
    };

    it("takes x-forwarded-for from a trusted proxy, and caps the app whatever the addresses", async () => {
      const results = [];
      for (let i = 0; i < 7; i++) results.push(await grpcLogin(rig, i, `198.51.100.7, 203.0.113.${i + 1}`));
      expect(results.slice(0, 5).map((r) => r.err?.code ?? 0)).to.deep.equal([0, 0, 0, 0, 0]);
      for (const r of results.slice(5)) {
        expect(r.err?.code).to.equal(status.RESOURCE_EXHAUSTED);
        expect(r.err?.metadata.get("retry-after")[0]).to.match(/^\d+$/);
      }
    });

    it("ignores x-forwarded-for from a peer outside TRUSTED_PROXY_CIDRS", async () => {
      const results = [];
      for (let i = 0; i < 3; i++) results.push(await grpcLogin(untrusted, 100 + i, `203.0.113.${i + 1}`));
      expect(results.map((r) => r.err?.code ?? 0)).to.deep.equal([0, 0, status.RESOURCE_EXHAUSTED]);
    });
  });

  describe("x-forwarded-for from a gRPC caller while TRUSTED_PROXY_CIDRS is unset", () => {
    let rig: Rig;
    before(async function () {
      this.timeout(30_000);
      rig = await Rig.start({
        LOGIN_LIMIT_IP: "3/3600",
        LOGIN_LIMIT_APP: "off",
        API_KEY_FAILURES_IP: "3/300",
        TOKEN_FAILURES_IP: "3/300",
        TOKEN_FAILURES_CLIENT: "off",
      });
    });
    after(async () => rig.stop());

    /** Codes of `n` gRPC calls from this loopback client, each naming another client address. */
    async function rotating(n: number, first: number, call: (xff: string, i: number) => Promise<number>) {
      const codes = [];
      for (let i = 0; i < n; i++) codes.push(await call(`203.0.113.${first + i}`, i));
      return codes;
    }

    const login = (xff: string, phone: string) => {
      const client = new SessionServiceClient(rig.app.grpcAddress, insecure);
      return unary(
        client.startOtpLogin.bind(client),
        { appId: rig.appId, identifier: { type: "phone_number", value: phone } },
        metadata({ "x-forwarded-for": xff }),
      ).finally(() => {
        client.close();
      });
    };
    const lookup = (xff: string, key: string) => {
      const client = new LookupServiceClient(rig.app.grpcAddress, insecure);
      return unary(
        client.lookupPhoneNumber.bind(client),
        { phoneNumber: "+33612345678", type: [] },
        metadata({ "x-forwarded-for": xff, authorization: `Bearer ${key}` }),
      ).finally(() => {
        client.close();
      });
    };
    const token = (xff: string, clientId: string, secret: string) => {
      const client = new OAuthServiceClient(rig.app.grpcAddress, insecure);
      return unary(
        client.createToken.bind(client),
        {
          httpBody: {
            contentType: "application/x-www-form-urlencoded",
            data: Buffer.from("grant_type=client_credentials"),
            extensions: [],
          },
        },
        metadata({ "x-forwarded-for": xff, ...basicAuth(clientId, secret) }),
      ).finally(() => {
        client.close();
      });
    };

    it("counts login codes of one client naming a new address each time as that one client (LOGIN_LIMIT_IP)", async () => {
      const codes = await rotating(
        6,
        1,
        async (xff, i) => (await login(xff, `+3361410${String(i).padStart(4, "0")}`)).err?.code ?? 0,
      );
      expect(codes).to.deep.equal([0, 0, 0, ...Array<number>(3).fill(status.RESOURCE_EXHAUSTED)]);
    });

    it("counts wrong API keys of one client naming a new address each time as that one client (API_KEY_FAILURES_IP)", async () => {
      const codes = await rotating(
        6,
        20,
        async (xff, i) => (await lookup(xff, `rfk_wrong${i}`)).err?.code ?? 0,
      );
      expect(codes).to.deep.equal([
        ...Array<number>(3).fill(status.UNAUTHENTICATED),
        ...Array<number>(3).fill(status.RESOURCE_EXHAUSTED),
      ]);
    });

    it("counts wrong client secrets of one client naming a new address each time as that one client (TOKEN_FAILURES_IP)", async () => {
      const made = await rig.call(
        "POST",
        `/v2/session/apps/${rig.appId}/oauth/clients`,
        {
          client_name: "Backend",
          provider_url: "https://backend.example.com",
          scopes: [],
          grant_types: ["client_credentials"],
        },
        rig.mgmtKey,
      );
      expect(made.status).to.equal(201);
      const id = String(made.body.client_id);
      const codes = await rotating(6, 40, async (xff) => (await token(xff, id, "rfs_wrong")).err?.code ?? 0);
      expect(codes).to.deep.equal([
        ...Array<number>(3).fill(status.UNAUTHENTICATED),
        ...Array<number>(3).fill(status.RESOURCE_EXHAUSTED),
      ]);
    });

    it("does not count a caller naming another client's address against that client", async function () {
      this.timeout(30_000);
      const victim = "127.0.0.2";
      const fresh = await Rig.start({
        LOGIN_LIMIT_IP: "3/3600",
        LOGIN_LIMIT_APP: "off",
        API_KEY_FAILURES_IP: "3/300",
      });
      try {
        const client = new SessionServiceClient(fresh.app.grpcAddress, insecure);
        const keys = new LookupServiceClient(fresh.app.grpcAddress, insecure);
        try {
          for (let i = 0; i < 5; i++) {
            await unary(
              client.startOtpLogin.bind(client),
              {
                appId: fresh.appId,
                identifier: { type: "phone_number", value: `+3361420${String(i).padStart(4, "0")}` },
              },
              metadata({ "x-forwarded-for": victim }),
            );
            await unary(
              keys.lookupPhoneNumber.bind(keys),
              { phoneNumber: "+33612345678", type: [] },
              metadata({ "x-forwarded-for": victim, authorization: `Bearer rfk_wrong${i}` }),
            );
          }
        } finally {
          client.close();
          keys.close();
        }
        // Nothing was counted under the named address.
        const counted = await fresh.app.registry.redis.keys(
          `${fresh.app.config.REDIS_KEY_PREFIX}*${victim}*`,
        );
        expect(counted).to.deep.equal([]);
        // The client really at that address logs in, and its wrong key is only told it is wrong.
        const login = await callFrom(victim, `${fresh.app.baseUrl}/v1/session/login/otp`, "POST", {
          app_id: fresh.appId,
          identifier: { type: "phone_number", value: "+33614300000" },
        });
        expect(login.status, JSON.stringify(login.body)).to.equal(200);
        const wrong = await callFrom(
          victim,
          `${fresh.app.baseUrl}/v2/lookup/+33612345678`,
          "GET",
          undefined,
          {
            authorization: "Bearer rfk_mine_but_mistyped",
          },
        );
        expect([wrong.status, wrong.body.code]).to.deep.equal([401, "invalid_api_key"]);
        // While the caller itself is the one held back.
        const counted127 = await fresh.app.registry.redis.keys(
          `${fresh.app.config.REDIS_KEY_PREFIX}*127.0.0.1*`,
        );
        expect(counted127).to.not.deep.equal([]);
      } finally {
        await fresh.stop();
      }
    });
  });

  describe("strangers cannot lock a user out of its usual network (known sources)", () => {
    const PASSWORD = "usual-passw0rd";
    // The tests call from 127.0.0.1; strangers from other /24s of the loopback network.
    const USUAL = "127.0.0.1";
    type Answer = Awaited<ReturnType<typeof callFrom>>;
    let rig: Rig;
    before(async function () {
      this.timeout(30_000);
      rig = await Rig.start({
        PASSWORD_FAILURES_IDENTIFIER: "10/900",
        PASSWORD_FAILURES_IP: "30/300",
        RATE_LIMIT_NUMBER: "5/600",
        OTP_CHECK_LIMIT: "10/900",
        LOGIN_LIMIT_IP: "20/3600",
      });
    });
    after(async () => rig.stop());

    const post = (address: string, path: string, body: unknown) =>
      callFrom(address, `${rig.app.baseUrl}${path}`, "POST", body);
    const passwordLogin = (address: string, identifier: Json, password: string) =>
      post(address, "/v1/session/login/password", { app_id: rig.appId, identifier, password });
    const askCode = (address: string, identifier: Json) =>
      post(address, "/v1/session/login/otp", { app_id: rig.appId, identifier });
    const checkCode = (address: string, challengeToken: unknown, code: string) =>
      post(address, "/v1/session/login/otp/check", { challenge_token: challengeToken, code });

    function expectStatus(r: Answer, status: number, what: string): void {
      expect(r.status, `${what}: ${JSON.stringify(r.body)}`).to.equal(status);
    }
    function expectRefused(r: Answer, what: string, windowSeconds: number): void {
      expectStatus(r, 429, what);
      expect(r.body.code).to.equal("too_many_attempts");
      expect(Number(r.headers["retry-after"]), what).to.be.within(1, windowSeconds);
    }

    async function createUser(flag: "--phone" | "--email", value: string): Promise<void> {
      const made = await runCli(
        ["users", "create", "--app", rig.appId, flag, value, "--password", PASSWORD],
        cliEnv(rig.app.config),
      );
      expect(made.code, made.stderr).to.equal(0);
    }

    /**
     * From `address`: `passwords` wrong passwords, then `requests` code requests and two wrong
     * codes in each challenge, every one answered as an attempt (401, 200, 400). Resolves the
     * challenge tokens.
     */
    async function fail(
      address: string,
      identifier: { type: string; value: string },
      counts: { passwords: number; requests: number },
      codeOf: (nth: number) => Promise<string>,
      sentBefore: number,
    ): Promise<unknown[]> {
      for (let i = 0; i < counts.passwords; i++) {
        expectStatus(await passwordLogin(address, identifier, `wrong guess ${i}`), 401, "a wrong password");
      }
      const tokens: unknown[] = [];
      for (let i = 0; i < counts.requests; i++) {
        const asked = await askCode(address, identifier);
        expectStatus(asked, 200, `code request ${i + 1} from ${address}`);
        tokens.push(asked.body.challenge_token);
      }
      for (let i = 0; i < 2 * counts.requests; i++) {
        const c = Math.floor(i / 2);
        const checked = await checkCode(address, tokens[c], wrongGuess(i, await codeOf(sentBefore + c)));
        expectStatus(checked, 400, `wrong code ${i + 1} from ${address}`);
        expect(checked.body.code).to.equal("invalid_code");
      }
      return tokens;
    }

    it("logs a user in from its usual network, by password and by code, after a stranger's failures from another filled its identifier's windows", async function () {
      this.timeout(60_000);
      const phone = "+33612970001";
      const id = { type: "phone_number", value: phone };
      await createUser("--phone", phone);
      // The usual address completed a login before.
      expectStatus(await passwordLogin(USUAL, id, PASSWORD), 200, "the first login");

      // Every 15 minutes, a stranger could do this much and, until now, lock the user out.
      const stranger = "127.0.1.9";
      const tokens = await fail(stranger, id, { passwords: 10, requests: 5 }, (n) => rig.codeTo(phone, n), 0);
      expectRefused(await passwordLogin(stranger, id, PASSWORD), "the stranger's 11th password", 900);
      expectRefused(await askCode(stranger, id), "the stranger's 6th code request", 600);
      expectRefused(
        await checkCode(stranger, tokens[4], await rig.codeTo(phone, 4)),
        "the stranger's 11th code",
        900,
      );

      // The user, from its usual address: the right password, then a code.
      expectStatus(await passwordLogin(USUAL, id, PASSWORD), 200, "the user's password");
      const asked = await askCode(USUAL, id);
      expectStatus(asked, 200, "the user's code request");
      const checked = await checkCode(USUAL, asked.body.challenge_token, await rig.codeTo(phone, 5));
      expectStatus(checked, 200, "the user's code");
      expect(checked.body).to.include.keys("access_token", "refresh_token");
      // Another address of the same /24 is the same network.
      expectStatus(await passwordLogin("127.0.0.77", id, PASSWORD), 200, "a neighbour address");

      // Strangers stay refused, this one and any other network.
      expectRefused(await passwordLogin(stranger, id, PASSWORD), "the stranger's password", 900);
      expectRefused(await passwordLogin("127.0.2.9", id, PASSWORD), "another stranger's password", 900);
      expectRefused(await askCode("127.0.2.9", id), "another stranger's code request", 600);
      expect(rig.smsTo(phone), "codes sent").to.equal(6);
    });

    it("still stops a known source at its own windows after its own failures", async function () {
      this.timeout(60_000);
      const email = "known-source@example.com";
      const id = { type: "email_address", value: email };
      await createUser("--email", email);
      expectStatus(await passwordLogin(USUAL, id, PASSWORD), 200, "the first login");
      const codeOf = (n: number) => rig.mailCodeTo(email, n);
      // A stranger fills the identifier's windows; they do not count the known source's attempts.
      await fail("127.0.3.9", id, { passwords: 10, requests: 5 }, codeOf, 0);

      // The known source gets the limit's worth of each, in windows of its own, and no more.
      const tokens = await fail(USUAL, id, { passwords: 10, requests: 5 }, codeOf, 5);
      expectRefused(await passwordLogin(USUAL, id, PASSWORD), "the right password after 10 failures", 900);
      expectRefused(await askCode(USUAL, id), "a 6th code request", 600);
      expectRefused(
        await checkCode(USUAL, tokens[4], await codeOf(9)),
        "the right code after 10 wrong ones",
        900,
      );
      expect(rig.mailsTo(email), "codes sent").to.have.length(10);
    });

    it("remembers a login's network for 30 days as a keyed hash: Redis holds neither the identifier nor the address", async function () {
      this.timeout(30_000);
      const email = "remembered@example.com";
      const { redis } = rig.app.registry;
      const pattern = `${rig.app.config.REDIS_KEY_PREFIX}known:{${rig.appId}}:*`;
      const before = await redis.keys(pattern);
      const asked = await askCode(USUAL, { type: "email_address", value: email });
      expectStatus(asked, 200, "the code request");
      expectStatus(
        await checkCode(USUAL, asked.body.challenge_token, await rig.mailCodeTo(email, 0)),
        200,
        "the code",
      );
      const remembered = (await redis.keys(pattern)).filter((k) => !before.includes(k));
      expect(remembered).to.have.length(1);
      const [key = ""] = remembered;
      expect(key).to.match(/:[0-9a-f]{64}$/);
      expect(key).to.not.match(/remembered|127\.0\.0/);
      const day = 86_400_000;
      expect(await redis.pttl(key)).to.be.within(30 * day - 60_000, 30 * day);
    });
  });

  describe("app-wide login limits spare the app's users (LOGIN_LIMIT_APP)", () => {
    let rig: Rig;
    before(async function () {
      this.timeout(30_000);
      rig = await Rig.start({ LOGIN_LIMIT_APP: "1000/3600", LOGIN_LIMIT_IP: "10/3600" });
    });
    after(async () => rig.stop());

    const askCode = (address: string, identifier: Json) =>
      callFrom(address, `${rig.app.baseUrl}/v1/session/login/otp`, "POST", { app_id: rig.appId, identifier });

    it("serves the app's users their codes while strangers' requests for new identifiers fill the app's window, which refuses a new one", async function () {
      this.timeout(300_000);
      // A user the operator made, and one a completed login made (its code took a place).
      const phone = "+33612960001";
      const made = await runCli(
        ["users", "create", "--app", rig.appId, "--phone", phone],
        cliEnv(rig.app.config),
      );
      expect(made.code, made.stderr).to.equal(0);
      const returning = "returning@example.com";
      const first = await askCode("127.0.0.1", { type: "email_address", value: returning });
      expect(first.status, JSON.stringify(first.body)).to.equal(200);
      const loggedIn = await rig.call("POST", "/v1/session/login/otp/check", {
        challenge_token: first.body.challenge_token,
        code: await rig.mailCodeTo(returning, 0),
      });
      expect(loggedIn.status, JSON.stringify(loggedIn.body)).to.equal(200);
      const metricsBefore = (await rig.app.registry.metrics.exposition()).body;

      // 100 addresses ask 10 codes each, for identifiers no user holds: the app's window fills.
      const flood = await Promise.all(
        Array.from({ length: 100 }, async (_, a) => {
          const statuses: number[] = [];
          for (let i = 0; i < 10; i++) {
            const r = await askCode(`127.0.4.${a + 1}`, {
              type: "email_address",
              value: `new-${a}-${i}@example.com`,
            });
            statuses.push(r.status);
          }
          return statuses;
        }),
      );
      const statuses = flood.flat();
      expect(statuses.filter((s) => s === 200)).to.have.length(999);
      expect(statuses.filter((s) => s === 429)).to.have.length(1);
      const refused = await askCode("127.0.5.1", { type: "email_address", value: "newcomer@example.com" });
      expect(refused.status, JSON.stringify(refused.body)).to.equal(429);
      expect(refused.body.code).to.equal("too_many_attempts");
      expect(Number(refused.headers["retry-after"])).to.be.within(3000, 3600);
      const metrics = (await rig.app.registry.metrics.exposition()).body;
      const refusals = (text: string) =>
        sample(text, "ringfence_abuse_refusals_total", { rule: "LOGIN_LIMIT_APP" });
      expect(refusals(metrics) - refusals(metricsBefore)).to.equal(2);

      // The app's users meet only their own windows: the operator's user logs in by SMS...
      const asked = await askCode("127.0.5.1", { type: "phone_number", value: phone });
      expect(asked.status, JSON.stringify(asked.body)).to.equal(200);
      const checked = await rig.call("POST", "/v1/session/login/otp/check", {
        challenge_token: asked.body.challenge_token,
        code: await rig.codeTo(phone, 0),
      });
      expect(checked.status, JSON.stringify(checked.body)).to.equal(200);
      // ...and the login's user gets its email code.
      const again = await askCode("127.0.5.2", { type: "email_address", value: returning });
      expect(again.status, JSON.stringify(again.body)).to.equal(200);
      await rig.mailCodeTo(returning, 1);
      // A new identifier is still refused.
      const still = await askCode("127.0.5.2", { type: "email_address", value: "newcomer@example.com" });
      expect(still.status).to.equal(429);
    });

    it("caps an app's login SMS to numbers no user holds (APP_SMS_DAILY_LIMIT), and still texts its users", async function () {
      this.timeout(30_000);
      const capped = await Rig.start({ APP_SMS_DAILY_LIMIT: "3/86400", LOGIN_LIMIT_APP: "off" });
      try {
        const ask = (phone: string) =>
          capped.call("POST", "/v1/session/login/otp", {
            app_id: capped.appId,
            identifier: { type: "phone_number", value: phone },
          });
        // Each number in a range of its own (SPAM_RANGE_BURST counts ranges).
        for (let i = 0; i < 3; i++) expect((await ask(`+3361${i}000001`)).status).to.equal(200);
        const refused = await ask("+33613000001");
        expect([refused.status, refused.body.code], "a 4th new number").to.deep.equal([
          429,
          "too_many_attempts",
        ]);
        expect(Number(refused.headers.get("retry-after"))).to.be.within(86_000, 86_400);
        // An email code does not count as an SMS.
        expect(
          (
            await capped.call("POST", "/v1/session/login/otp", {
              app_id: capped.appId,
              identifier: { type: "email_address", value: "newcomer@example.com" },
            })
          ).status,
        ).to.equal(200);
        const user = "+33614000001";
        const made = await runCli(
          ["users", "create", "--app", capped.appId, "--phone", user],
          cliEnv(capped.app.config),
        );
        expect(made.code, made.stderr).to.equal(0);
        const served = await ask(user);
        expect(served.status, JSON.stringify(served.body)).to.equal(200);
        await capped.codeTo(user, 0);
        const metrics = (await capped.app.registry.metrics.exposition()).body;
        expect(sample(metrics, "ringfence_abuse_refusals_total", { rule: "APP_SMS_DAILY_LIMIT" })).to.equal(
          1,
        );
      } finally {
        await capped.stop();
      }
    });
  });

  describe("spam rules and counts of step-up messages", () => {
    let rig: Rig;
    before(async function () {
      this.timeout(30_000);
      rig = await Rig.start({});
    });
    after(async () => rig.stop());

    it("refuses a step-up SMS to a premium-rate number with 403 spam_detected, sending nothing", async function () {
      this.timeout(30_000);
      const email = "premium@example.com";
      await runCli(
        ["users", "create", "--app", rig.appId, "--email", email, "--phone", FR_PREMIUM],
        cliEnv(rig.app.config),
      );
      const started = await rig.call("POST", "/v1/session/login/otp", {
        app_id: rig.appId,
        identifier: { type: "email_address", value: email },
      });
      expect(started.status).to.equal(200);
      await rig.mail.until((r) => r.length > 0);
      const code = SmsReceiver.code({
        body: (JSON.parse(rig.mail.received[0]?.body ?? "{}") as { body: string }).body,
      } as never);
      const checked = await rig.call("POST", "/v1/session/login/otp/check", {
        challenge_token: started.body.challenge_token,
        code,
      });
      expect(checked.status).to.equal(200);
      const before = rig.sms.messages.length;
      const asked = await rig.call(
        "POST",
        "/v1/session/stepup/request",
        { scope: PWD },
        checked.body.access_token as string,
      );
      expect(asked.status).to.equal(403);
      expect(asked.body.code).to.equal("spam_detected");
      expect(rig.sms.messages.length).to.equal(before);
    });

    it("counts the app's SMS and email messages in ringfence apps show", async function () {
      this.timeout(30_000);
      await rig.login("+33612990010");
      await rig.login("+33612990011");
      const shown = await runCli(["apps", "show", rig.appId], cliEnv(rig.app.config));
      expect(shown.code, shown.stderr).to.equal(0);
      const body = JSON.parse(shown.stdout) as Json;
      expect(body).to.include({ app_id: rig.appId, name: "Shop" });
      expect(body.scopes).to.deep.equal([PWD]);
      expect(body.messages).to.deep.equal({
        sms_sent: rig.sms.messages.length,
        email_sent: rig.mail.received.length,
      });
      expect(JSON.stringify(body)).to.not.match(/hash|rfm_/);
      const unknown = await runCli(["apps", "show", "app_nope"], cliEnv(rig.app.config));
      expect(unknown.code).to.equal(2);
    });

    it("answers Cache-Control: no-store on every session answer that carries a token", async function () {
      this.timeout(30_000);
      const phone = "+33612990020";
      const noStore = (r: { headers: Headers }, what: string) => {
        expect(r.headers.get("cache-control"), what).to.equal("no-store");
      };
      const before = rig.smsTo(phone);
      const started = await rig.call("POST", "/v1/session/login/otp", {
        app_id: rig.appId,
        identifier: { type: "phone_number", value: phone },
      });
      noStore(started, "login/otp");
      const checked = await rig.call("POST", "/v1/session/login/otp/check", {
        challenge_token: started.body.challenge_token,
        code: await rig.codeTo(phone, before),
      });
      noStore(checked, "login/otp/check");
      const refreshed = await rig.call("POST", "/v1/session/refresh", {
        refresh_token: checked.body.refresh_token,
      });
      noStore(refreshed, "refresh");
      const asked = await rig.call(
        "POST",
        "/v1/session/stepup/request",
        { scope: PWD },
        refreshed.body.access_token as string,
      );
      noStore(asked, "stepup/request");
      const stepped = await rig.call("POST", "/v1/session/otp/check", {
        challenge_token: asked.body.challenge_token,
        code: await rig.codeTo(phone, before + 1),
      });
      expect(stepped.body.current_step).to.equal("completed");
      noStore(stepped, "otp/check");
    });
  });

  describe("delegated step-up decisions (STEPUP_LIMIT_SESSION)", () => {
    let rig: Rig;
    let hookCalls = 0;
    let hook: import("node:http").Server;
    before(async function () {
      this.timeout(30_000);
      const { createServer } = await import("node:http");
      hook = createServer((req, res) => {
        if (req.url === "/decide") hookCalls++;
        res.statusCode = req.url === "/jwks.json" ? 200 : 500;
        res.end(req.url === "/jwks.json" ? '{"keys":[]}' : "down");
      });
      await new Promise<void>((r) => hook.listen(0, "127.0.0.1", r));
      const base = `http://127.0.0.1:${String((hook.address() as import("node:net").AddressInfo).port)}`;
      rig = await Rig.start({ STEPUP_LIMIT_SESSION: "2/900" });
      const stored = await rig.call(
        "POST",
        `/v2/session/apps/${rig.appId}/config/stepup`,
        {
          jwks_url: `${base}/jwks.json`,
          step_keys: [],
          allowed_scopes: [{ scope: PWD, mode: "delegated", delegated: { url: `${base}/decide` } }],
        },
        rig.mgmtKey,
      );
      expect(stored.status).to.equal(201);
    });
    after(async () => {
      await rig.stop();
      await new Promise((r) => hook.close(r));
    });

    it("calls the app's hook at most the step-up limit of times per session", async function () {
      this.timeout(30_000);
      const { access_token: token } = await rig.login("+33612990030");
      const asked = [];
      for (let i = 0; i < 4; i++)
        asked.push(await rig.call("POST", "/v1/session/stepup/request", { scope: PWD }, token));
      expect(asked.slice(0, 2).map((a) => a.body.status)).to.deep.equal(["block", "block"]);
      for (const a of asked.slice(2)) expect429(a, "a third hook call in one session");
      expect(hookCalls).to.equal(2);
    });
  });

  describe("failed client authentications at the token endpoint", () => {
    let rig: Rig;
    before(async function () {
      this.timeout(30_000);
      rig = await Rig.start({ TOKEN_FAILURES_CLIENT: "3/300", TOKEN_FAILURES_IP: "off" });
    });
    after(async () => rig.stop());

    async function client(r: Rig): Promise<{ id: string; secret: string }> {
      const made = await r.call(
        "POST",
        `/v2/session/apps/${r.appId}/oauth/clients`,
        {
          client_name: "Backend",
          provider_url: "https://backend.example.com",
          scopes: [],
          grant_types: ["client_credentials"],
          // The token calls below send the secret in the form.
          token_endpoint_auth_method: "client_secret_post",
        },
        r.mgmtKey,
      );
      expect(made.status).to.equal(201);
      return { id: made.body.client_id as string, secret: made.body.client_secret as string };
    }

    const token = (r: Rig, id: string, secret: string) =>
      rest(r.app.baseUrl).call("POST", "/v1/session/oauth/token", {
        form: { grant_type: "client_credentials", client_id: id, client_secret: secret },
      });

    it("answers wrong secrets 429 once a client's failures fill TOKEN_FAILURES_CLIENT, and still serves the right one", async () => {
      const c = await client(rig);
      for (let i = 0; i < 3; i++) expect((await token(rig, c.id, "rfs_wrong")).status).to.equal(401);
      const wrong = await token(rig, c.id, "rfs_wrong");
      expect(wrong.status).to.equal(429);
      expect(wrong.body.error).to.equal("too_many_attempts");
      expect(Number(wrong.headers.get("retry-after"))).to.be.within(1, 300);
      expect(wrong.headers.get("cache-control")).to.equal("no-store");
      // A client_id is public: whoever knows it cannot lock the real client out.
      expect((await token(rig, c.id, c.secret)).status).to.equal(200);
    });

    it("does not count successful authentications", async () => {
      const c = await client(rig);
      for (let i = 0; i < 8; i++) expect((await token(rig, c.id, c.secret)).status).to.equal(200);
    });

    it("limits failures per address across client ids (TOKEN_FAILURES_IP), and still serves a right secret from it", async function () {
      this.timeout(30_000);
      const byIp = await Rig.start({ TOKEN_FAILURES_CLIENT: "off", TOKEN_FAILURES_IP: "4/300" });
      try {
        const [a, b, c] = [await client(byIp), await client(byIp), await client(byIp)];
        for (const x of [a, a, b, b]) expect((await token(byIp, x.id, "rfs_wrong")).status).to.equal(401);
        // From that address, every wrong secret is refused outright, of any client.
        const wrong = await token(byIp, c.id, "rfs_wrong");
        expect(wrong.status).to.equal(429);
        expect(wrong.body.error).to.equal("too_many_attempts");
        expect(Number(wrong.headers.get("retry-after"))).to.be.within(1, 300);
        // An address may be shared: a right secret is served, as a right API key is (decisions 8.1).
        expect((await token(byIp, c.id, c.secret)).status).to.equal(200);
      } finally {
        await byIp.stop();
      }
    });

    it("holds TOKEN_FAILURES_IP under 40 concurrent wrong attempts, and counts no success", async function () {
      this.timeout(30_000);
      const byIp = await Rig.start({ TOKEN_FAILURES_CLIENT: "off", TOKEN_FAILURES_IP: "5/300" });
      try {
        const good = await client(byIp);
        for (let i = 0; i < 8; i++) expect((await token(byIp, good.id, good.secret)).status).to.equal(200);
        const bad = await client(byIp);
        const answers = await Promise.all(
          Array.from({ length: 40 }, () => token(byIp, bad.id, "rfs_wrong").then((r) => r.status)),
        );
        expect(answers.filter((s) => s === 401)).to.have.length(5);
        expect(answers.filter((s) => s === 429)).to.have.length(35);
      } finally {
        await byIp.stop();
      }
    });

    it("serves more concurrent right secrets from one address than TOKEN_FAILURES_IP, refusing none", async function () {
      this.timeout(30_000);
      const byIp = await Rig.start({ TOKEN_FAILURES_CLIENT: "off", TOKEN_FAILURES_IP: "5/300" });
      try {
        const good = await client(byIp);
        const answers = await Promise.all(
          Array.from({ length: 40 }, () => token(byIp, good.id, good.secret).then((r) => r.status)),
        );
        expect(
          answers.filter((s) => s === 200),
          "a right secret takes no place",
        ).to.have.length(40);
        // Then wrong secrets still get exactly the limit's worth of 401s.
        const bad = await client(byIp);
        const wrong = await Promise.all(
          Array.from({ length: 20 }, () => token(byIp, bad.id, "rfs_wrong").then((r) => r.status)),
        );
        expect(wrong.filter((s) => s === 401)).to.have.length(5);
        expect(wrong.filter((s) => s === 429)).to.have.length(15);
        // A full window still serves the right secret, and counts it nowhere.
        const keys = new Keys(byIp.app.config.REDIS_KEY_PREFIX);
        const window = keys.key("rl", "ip:127.0.0.1", "token-failures");
        const before = await byIp.app.registry.redis.zrange(window, "0", "-1");
        expect(before).to.have.length(5);
        expect((await token(byIp, good.id, good.secret)).status).to.equal(200);
        expect(await byIp.app.registry.redis.zrange(window, "0", "-1")).to.deep.equal(before);
      } finally {
        await byIp.stop();
      }
    });
  });

  describe("wrong account API keys from one address (API_KEY_FAILURES_IP)", () => {
    let app: TestApp;
    let customer: { uuid: string; key: string };
    before(async () => {
      app = await startTestApp({ API_KEY_FAILURES_IP: "3/300" });
      const made = await app.registry.accounts.create({
        name: "Keys",
        balanceMicros: 0,
        spendingLimitMicros: 0,
        features: [],
        regions: [],
      });
      customer = { uuid: made.account.customerUuid, key: made.apiKey };
    });
    after(async () => {
      await app.stop();
    });

    it("refuses only wrong keys once an address's window is full, V2 and V1 alike, and serves the right key, counting the rule", async () => {
      const v2 = (key: string) =>
        rest(app.baseUrl).get("/v2/lookup/+33612345678", { authorization: `Bearer ${key}` });
      const v1 = (key: string) =>
        rest(app.baseUrl).get("/v1/lookup/+33612345678", {
          "customer-uuid": customer.uuid,
          "x-api-key": key,
        });
      expect((await v2(customer.key)).status, "a right key counts nothing").to.equal(200);
      // Three wrong keys, through both versions, are told so; the fourth fills the window.
      expect((await v2("rfk_wrong1")).body.code).to.equal("invalid_api_key");
      expect((await v1("rfk_wrong2")).body.code).to.equal("account_invalid");
      expect((await v2("rfk_wrong3")).body.code).to.equal("invalid_api_key");
      const refused = await v2("rfk_wrong4");
      expect(refused.status).to.equal(429);
      expect(refused.body).to.include({ code: "too_many_attempts", type: "too_many_requests" });
      expect(Number(refused.headers.get("retry-after"))).to.be.within(1, 300);
      // The window is full: the right key is still served, in either version.
      const right = await v2(customer.key);
      expect(right.status, JSON.stringify(right.body)).to.equal(200);
      expect(right.body).to.include({ phone_number: "+33612345678" });
      const rightV1 = await v1(customer.key);
      expect(rightV1.status, JSON.stringify(rightV1.body)).to.equal(200);
      expect(rightV1.body).to.include({ country_code: "FR" });
      // Wrong keys stay refused: V2 429 too_many_attempts, V1 400 bad_request, both with Retry-After.
      const wrongV2 = await v2("rfk_wrong5");
      expect([wrongV2.status, wrongV2.body.code]).to.deep.equal([429, "too_many_attempts"]);
      expect(Number(wrongV2.headers.get("retry-after"))).to.be.within(1, 300);
      const wrongV1 = await v1("rfk_wrong6");
      expect([wrongV1.status, wrongV1.body.code]).to.deep.equal([400, "bad_request"]);
      expect(Number(wrongV1.headers.get("retry-after"))).to.be.within(1, 300);
      const metrics = await app.registry.metrics.exposition();
      expect(metrics.body).to.match(/ringfence_abuse_refusals_total\{rule="API_KEY_FAILURES_IP"\} 3/);
    });
  });

  describe("settings", () => {
    const LIMITS = [
      "STEPUP_LIMIT_USER",
      "STEPUP_LIMIT_SESSION",
      "OTP_CHECK_LIMIT",
      "LOGIN_LIMIT_APP",
      "LOGIN_LIMIT_IP",
      "APP_SMS_DAILY_LIMIT",
      "TOKEN_FAILURES_CLIENT",
      "TOKEN_FAILURES_IP",
      "API_KEY_FAILURES_IP",
    ] as const;

    for (const name of LIMITS) {
      it(`${name} takes count/seconds or off, and a bad value stops the start naming it`, () => {
        expect(loadConfig({ [name]: "7/60" })[name]).to.deep.equal({ limit: 7, windowSeconds: 60 });
        expect(loadConfig({ [name]: "off" })[name]).to.equal(null);
        expect(() => loadConfig({ [name]: "lots" }))
          .to.throw(ConfigError)
          .with.property("message")
          .that.matches(new RegExp(`^invalid ${name}: `));
      });
    }

    it("has the documented defaults", () => {
      const c = loadConfig({});
      expect(c.STEPUP_LIMIT_USER).to.deep.equal({ limit: 10, windowSeconds: 3600 });
      expect(c.STEPUP_LIMIT_SESSION).to.deep.equal({ limit: 5, windowSeconds: 900 });
      expect(c.OTP_CHECK_LIMIT).to.deep.equal({ limit: 10, windowSeconds: 900 });
      expect(c.LOGIN_LIMIT_APP).to.deep.equal({ limit: 1000, windowSeconds: 3600 });
      expect(c.LOGIN_LIMIT_IP).to.deep.equal({ limit: 10, windowSeconds: 3600 });
      expect(c.APP_SMS_DAILY_LIMIT).to.deep.equal({ limit: 10_000, windowSeconds: 86_400 });
      expect(c.TOKEN_FAILURES_CLIENT).to.deep.equal({ limit: 10, windowSeconds: 300 });
      expect(c.TOKEN_FAILURES_IP).to.deep.equal({ limit: 30, windowSeconds: 300 });
      expect(c.API_KEY_FAILURES_IP).to.deep.equal({ limit: 30, windowSeconds: 300 });
      // No proxy is trusted unless named: any caller could otherwise name its own address.
      expect(c.TRUSTED_PROXY_CIDRS).to.deep.equal([]);
    });

    it("TRUSTED_PROXY_CIDRS refuses a malformed CIDR naming the variable", () => {
      for (const bad of ["10.0.0.0/33", "not-an-ip/8", "::1/129", "10.0.0.0/x"]) {
        expect(() => loadConfig({ TRUSTED_PROXY_CIDRS: bad }), bad)
          .to.throw(ConfigError)
          .with.property("message")
          .that.matches(/^invalid TRUSTED_PROXY_CIDRS: /);
      }
    });
  });
});
