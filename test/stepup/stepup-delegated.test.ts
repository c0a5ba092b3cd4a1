import { expect } from "chai";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { CompactSign, exportJWK, generateKeyPair, type CryptoKey } from "jose";
import { cliEnv, runCli, startTestApp, type TestApp } from "../support/app.js";
import { rest, type Json } from "../support/rest.js";
import { SmsReceiver } from "../support/receivers.js";

/** The app's side: a key set and a delegation hook that signs its decisions with it. */
class AppHook {
  decision: Json = { status: "continue", granted_for: 120, grant_mode: "session", steps: [] };
  signWith: "app" | "stranger" = "app";
  received: { body: Json; signature: string }[] = [];
  private constructor(
    private readonly server: Server,
    private readonly key: CryptoKey,
    private readonly stranger: CryptoKey,
    readonly base: string,
  ) {}

  static async start(): Promise<AppHook> {
    const app = await generateKeyPair("ES256");
    const stranger = await generateKeyPair("ES256");
    const jwk = { ...(await exportJWK(app.publicKey)), kid: "app-key-1", alg: "ES256", use: "sig" };
    const ref: { self?: AppHook } = {};
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        void (async () => {
          if (req.url === "/jwks.json") {
            res.setHeader("content-type", "application/json");
            res.end(JSON.stringify({ keys: [jwk] }));
            return;
          }
          const self = ref.self;
          if (self === undefined) return;
          self.received.push({
            body: JSON.parse(Buffer.concat(chunks).toString()) as Json,
            signature: String(req.headers["x-webhook-signature"]),
          });
          const key = self.signWith === "app" ? self.key : self.stranger;
          const jws = await new CompactSign(new TextEncoder().encode(JSON.stringify(self.decision)))
            .setProtectedHeader({ alg: "ES256", kid: "app-key-1" })
            .sign(key);
          res.setHeader("content-type", "application/jose");
          res.end(jws);
        })();
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const hook = new AppHook(
      server,
      app.privateKey,
      stranger.privateKey,
      `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    );
    ref.self = hook;
    return hook;
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((r) =>
      this.server.close(() => {
        r();
      }),
    );
  }
}

describe("step-up with a delegated entry", () => {
  let app: TestApp;
  let sms: SmsReceiver;
  let hook: AppHook;
  let appId: string;
  let key: string;

  before(async function () {
    this.timeout(30_000);
    sms = await SmsReceiver.start();
    hook = await AppHook.start();
    app = await startTestApp({
      SMS_PROVIDER: "http",
      SMS_HTTP_URL: sms.url,
      CHANGE_PASSWORD_GRANT_SECONDS: "1",
    });
    const made = JSON.parse(
      (await runCli(["apps", "create", "--name", "Delegating"], cliEnv(app.config))).stdout,
    ) as {
      app_id: string;
      management_api_key: string;
    };
    ({ app_id: appId, management_api_key: key } = made);
    for (const scope of ["reports:export", "svc:pwd:write"]) {
      await call("POST", `/v2/session/apps/${appId}/config/scopes`, { scope }, key);
    }
    const stored = await call(
      "POST",
      `/v2/session/apps/${appId}/config/stepup`,
      {
        jwks_url: `${hook.base}/jwks.json`,
        step_keys: [],
        allowed_scopes: [
          { scope: "reports:export", mode: "delegated", delegated: { url: `${hook.base}/decide` } },
        ],
      },
      key,
    );
    expect(stored.status, JSON.stringify(stored.body)).to.equal(201);
  });
  after(async () => {
    await app.stop();
    await sms.close();
    await hook.close();
  });

  const call = (method: string, path: string, body?: unknown, bearer?: string) =>
    rest(app.baseUrl).call(method, path, { body, bearer });

  let seq = 612_800_000;
  async function login(extra: Json = {}): Promise<{ access_token: string; refresh_token: string }> {
    const phone = `+33${(seq += 1000)}`;
    const before = sms.messages.length;
    const started = await call("POST", "/v1/session/login/otp", {
      app_id: appId,
      identifier: { type: "phone_number", value: phone },
    });
    await sms.receiver.until((r) => r.length > before);
    const code = SmsReceiver.code(sms.messages[before]!);
    const done = await call("POST", "/v1/session/login/otp/check", {
      challenge_token: started.body.challenge_token,
      code,
      ...extra,
    });
    return done.body as unknown as { access_token: string; refresh_token: string };
  }

  it("asks the app's hook, with a signed request, and grants the scope on a signed continue", async () => {
    const s = await login();
    hook.signWith = "app";
    const r = await call(
      "POST",
      "/v1/session/stepup/request",
      { scope: "reports:export", metadata: { reason: "monthly" } },
      s.access_token,
    );
    expect(r.body).to.include({ status: "continue" });
    const asked = hook.received.at(-1);
    expect(asked?.body).to.include({ scope_requested: "reports:export" });
    expect(asked?.body.metadata).to.deep.equal({ reason: "monthly" });
    expect(asked?.signature.split(".")).to.have.length(3);
    const me = await call("GET", "/v1/session/me", undefined, s.access_token);
    expect(me.body.scopes).to.deep.equal(["reports:export"]);
  });

  it("blocks when the hook signs with a key the app does not publish", async () => {
    const s = await login();
    hook.signWith = "stranger";
    const r = await call("POST", "/v1/session/stepup/request", { scope: "reports:export" }, s.access_token);
    expect(r.body).to.include({ status: "block" });
    expect((await call("GET", "/v1/session/me", undefined, s.access_token)).body.scopes).to.deep.equal([]);
  });

  it("blocks a scope the configuration does not cover", async () => {
    const s = await login();
    const r = await call("POST", "/v1/session/stepup/request", { scope: "svc:pwd:write" }, s.access_token);
    expect(r.body).to.include({ status: "block" });
  });

  it("lets a granted scope lapse after granted_for", async function () {
    this.timeout(10_000);
    const s = await login({ grant_change_password: true });
    await new Promise((r) => setTimeout(r, 1_200));
    const reset = await call(
      "POST",
      "/v1/session/me/password/reset",
      { password: "too-late-passw0rd" },
      s.access_token,
    );
    expect([reset.status, reset.body.code]).to.deep.equal([403, "insufficient_scope"]);
  });
});
