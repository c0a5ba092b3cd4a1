import { expect } from "chai";
import { createServer, type Server } from "node:net";
import type { AddressInfo } from "node:net";
import { VerifyServiceClient } from "../../src/gen/ringfence/verify/v1/verify_service.js";
import { loadConfig, ConfigError } from "../../src/config.js";
import { createLogger, type Logger } from "../../src/log.js";
import { OutboundGuard, OutboundRefused } from "../../src/net/outbound.js";
import { fundedAccount, postSend, sendRequest } from "../support/v1.js";
import { insecure, metadata, startTestApp, unary, type TestApp } from "../support/app.js";
import { testRedisUrl } from "../support/hooks.js";
import { waitFor } from "../support/redis.js";
import { rest } from "../support/rest.js";

/** A TCP listener on loopback that counts connections and answers each request `status`. */
class Listener {
  connections = 0;
  status = 200;
  location = "";
  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {}

  static async start(): Promise<Listener> {
    const ref: { self?: Listener } = {};
    const server = createServer((socket) => {
      const self = ref.self;
      if (self === undefined) return;
      self.connections++;
      socket.once("data", () => {
        const extra = self.location === "" ? "" : `location: ${self.location}\r\n`;
        socket.end(`HTTP/1.1 ${self.status} X\r\n${extra}content-length: 0\r\nconnection: close\r\n\r\n`);
      });
      socket.on("error", () => undefined);
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const self = new Listener(server, (server.address() as AddressInfo).port);
    ref.self = self;
    return self;
  }

  close(): Promise<void> {
    return new Promise((r) =>
      this.server.close(() => {
        r();
      }),
    );
  }
}

function capturingLogger(): { log: Logger; lines: string[] } {
  const lines: string[] = [];
  return { log: createLogger("debug", (l) => lines.push(l)), lines };
}

/** Every form of a refused address the team found callable, as a URL host. */
function refusedHosts(redisPort: number, listenerPort: number): [string, string][] {
  return [
    ["loopback", `127.0.0.1:${listenerPort}`],
    ["IPv6 loopback", `[::1]:${listenerPort}`],
    ["hexadecimal loopback", `0x7f000001:${listenerPort}`],
    ["decimal loopback", `2130706433:${listenerPort}`],
    ["octal loopback", `0177.0.0.1:${listenerPort}`],
    ["cloud metadata", "169.254.169.254"],
    ["10/8", "10.0.0.1"],
    ["172.16/12", "172.16.0.1"],
    ["192.168/16", "192.168.1.1"],
    ["CGNAT", "100.64.0.1"],
    ["unspecified", "0.0.0.0"],
    ["IPv4-mapped loopback", `[::ffff:127.0.0.1]:${listenerPort}`],
    ["IPv6 link-local", "[fe80::1]"],
    ["IPv6 unique local", "[fc00::1]"],
    ["multicast", "224.0.0.1"],
    ["localhost", `localhost:${listenerPort}`],
    ["the Redis port", `127.0.0.1:${redisPort}`],
  ];
}

describe("outbound calls to caller-supplied URLs (OUTBOUND_ALLOWED_CIDRS)", () => {
  let app: TestApp;
  let listener: Listener;
  let customer: { uuid: string; key: string };
  let appId: string;
  let mgmtKey: string;
  const logs = capturingLogger();

  before(async function () {
    this.timeout(30_000);
    listener = await Listener.start();
    app = await startTestApp({ OUTBOUND_ALLOWED_CIDRS: "" }, logs.log);
    const { account, apiKey } = await fundedAccount(app.registry.accounts, "Guarded");
    customer = { uuid: account.customerUuid, key: apiKey };
    const made = await app.registry.apps.create("Guarded");
    appId = made.app.appId;
    mgmtKey = made.managementApiKey;
    await app.registry.apps.addScope(appId, "svc:pwd:write");
  });
  after(async () => {
    await app.stop();
    await listener.close();
  });

  const call = (path: string, body: unknown, headers: Record<string, string>) =>
    rest(app.baseUrl).post(path, body, headers);

  const redisPort = () => Number(new URL(testRedisUrl()).port);

  it("refuses every private-address form as a V1 callback_url with 400 naming the field, storing nothing", async () => {
    for (const [name, host] of refusedHosts(redisPort(), listener.port)) {
      const r = await call(
        "/v1/authentication",
        { customer_uuid: customer.uuid, phone_number: "+33612345001", callback_url: `http://${host}/hook` },
        { "x-api-key": customer.key },
      );
      expect(r.status, name).to.equal(400);
      expect(r.body.code, name).to.equal("bad_request");
      expect(String(r.body.message), name).to.match(/^callback_url: /);
    }
    expect((await app.registry.accounts.get(customer.uuid))?.balanceMicros).to.equal(10_000_000);
    expect(listener.connections).to.equal(0);
  });

  it("refuses a private callback_url over gRPC too", async () => {
    const client = new VerifyServiceClient(app.grpcAddress, insecure);
    try {
      const { err } = await unary(
        client.createAuthentication.bind(client),
        sendRequest({
          customerUuid: customer.uuid,
          phoneNumber: "+33612345002",
          callbackUrl: "http://169.254.169.254/latest/meta-data",
        }),
        metadata({ "x-api-key": customer.key }),
      );
      expect(err?.code).to.equal(3);
      expect(err?.details).to.match(/^callback_url: /);
    } finally {
      client.close();
    }
  });

  it("refuses every private-address form as an app webhook url, storing nothing", async () => {
    for (const [name, host] of refusedHosts(redisPort(), listener.port)) {
      const r = await call(
        `/v2/session/apps/${appId}/webhooks`,
        { url: `http://${host}/hook`, events: ["session.created"] },
        { authorization: `Bearer ${mgmtKey}` },
      );
      expect(r.status, name).to.equal(400);
      expect(r.body, name).to.include({ code: "bad_request", field: "url" });
    }
    expect(await app.registry.redis.exists(app.registry.keys.key("app", appId, "webhooks"))).to.equal(0);
  });

  it("refuses every private-address form as a jwks_url or a delegated hook url", async () => {
    const config = (jwksUrl: string, hookUrl: string) => ({
      jwks_url: jwksUrl,
      step_keys: [],
      allowed_scopes: [{ scope: "svc:pwd:write", mode: "delegated", delegated: { url: hookUrl } }],
    });
    const publicUrl = "https://93.184.215.14/x";
    for (const [name, host] of refusedHosts(redisPort(), listener.port)) {
      const jwks = await call(
        `/v2/session/apps/${appId}/config/stepup`,
        config(`http://${host}/jwks.json`, publicUrl),
        {
          authorization: `Bearer ${mgmtKey}`,
        },
      );
      expect(jwks.status, name).to.equal(400);
      expect(jwks.body, name).to.include({ code: "invalid_stepup_config", field: "jwks_url" });
      const hook = await call(
        `/v2/session/apps/${appId}/config/stepup`,
        config(publicUrl, `http://${host}/decide`),
        {
          authorization: `Bearer ${mgmtKey}`,
        },
      );
      expect(hook.status, name).to.equal(400);
      expect(hook.body, name).to.include({
        code: "invalid_stepup_config",
        field: "allowed_scopes[0].delegated.url",
      });
    }
    expect(await app.registry.redis.exists(app.registry.keys.key("app", appId, "stepup"))).to.equal(0);
    expect(listener.connections).to.equal(0);
  });

  it("refuses URLs with credentials or another scheme, and never logs the password", async () => {
    for (const url of ["https://user:s3cret-pw@93.184.215.14/hook", "ftp://93.184.215.14/hook"]) {
      const r = await call(
        `/v2/session/apps/${appId}/webhooks`,
        { url, events: ["session.created"] },
        { authorization: `Bearer ${mgmtKey}` },
      );
      expect(r.status, url).to.equal(400);
      expect(r.body.field).to.equal("url");
    }
    const v1 = await call(
      "/v1/authentication",
      {
        customer_uuid: customer.uuid,
        phone_number: "+33612345003",
        callback_url: "https://user:s3cret-pw@93.184.215.14/hook",
      },
      { "x-api-key": customer.key },
    );
    expect(v1.status).to.equal(400);
    expect(String(v1.body.message)).to.match(/^callback_url: must not carry credentials/);
    expect(JSON.stringify(v1.body)).to.not.include("s3cret-pw");
    expect(logs.lines.join("\n")).to.not.include("s3cret-pw");
  });

  it("accepts a public address", async () => {
    const r = await call(
      `/v2/session/apps/${appId}/webhooks`,
      { url: "https://93.184.215.14/hook", events: ["session.created"] },
      { authorization: `Bearer ${mgmtKey}` },
    );
    expect(r.status).to.equal(201);
  });

  it("checks the address again at connect time: a hook stored while loopback was allowed is never called", async function () {
    this.timeout(40_000);
    // Instance A allows loopback: it registers the hook, and its one attempt meets a failing receiver.
    const target = await Listener.start();
    target.status = 503;
    const prefix = `t${Date.now().toString(36)}:`;
    const env = {
      REDIS_KEY_PREFIX: prefix,
      REDIS_URL: testRedisUrl(),
      WEBHOOK_BACKOFF_BASE_MS: "300",
      WEBHOOK_BACKOFF_MAX_MS: "300",
    };
    const a = await startTestApp({ ...env, OUTBOUND_ALLOWED_CIDRS: "127.0.0.0/8,::1/128" });
    const { account, apiKey } = await fundedAccount(a.registry.accounts, "Rebound");
    const sent = await postSend(a.baseUrl, apiKey, {
      customer_uuid: account.customerUuid,
      phone_number: "+33612345004",
      callback_url: `http://localhost:${target.port}/hook`,
    });
    expect(sent.status).to.equal(200);
    await waitFor(() => Promise.resolve(target.connections >= 1));
    await a.stop();
    const seenByA = target.connections;

    // Instance B, same data, allows nothing private: its retry refuses the address, for good.
    const b = capturingLogger();
    const second = await startTestApp({ ...env, OUTBOUND_ALLOWED_CIDRS: "" }, b.log);
    try {
      await waitFor(
        () => Promise.resolve(b.lines.some((l) => l.includes("webhook dropped: its address is not allowed"))),
        20_000,
      );
      await new Promise((r) => setTimeout(r, 700));
      expect(target.connections).to.equal(seenByA);
    } finally {
      await second.stop();
      await target.close();
    }
  });

  it("gives block, never connecting, when a stored delegated hook or jwks_url is refused", async function () {
    this.timeout(30_000);
    const hook = await Listener.start();
    const prefix = `t${Date.now().toString(36)}d:`;
    const env = { REDIS_KEY_PREFIX: prefix, REDIS_URL: testRedisUrl(), SMS_PROVIDER: "log" };
    const a = await startTestApp({ ...env, OUTBOUND_ALLOWED_CIDRS: "127.0.0.0/8" });
    const made = await a.registry.apps.create("Delegating");
    await a.registry.apps.addScope(made.app.appId, "svc:pwd:write");
    const stored = await rest(a.baseUrl).call("POST", `/v2/session/apps/${made.app.appId}/config/stepup`, {
      bearer: made.managementApiKey,
      body: {
        jwks_url: `http://127.0.0.1:${hook.port}/jwks.json`,
        step_keys: [],
        allowed_scopes: [
          {
            scope: "svc:pwd:write",
            mode: "delegated",
            delegated: { url: `http://127.0.0.1:${hook.port}/decide` },
          },
        ],
      },
    });
    expect(stored.status).to.equal(201);
    await a.stop();

    const b = await startTestApp({ ...env, OUTBOUND_ALLOWED_CIDRS: "" });
    try {
      const { user } = await b.registry.users.findOrCreate(made.app.appId, {
        type: "email_address",
        value: "someone@example.com",
      });
      const { sessionId, login } = await b.registry.sessions.open(user.userId, made.app.appId, "jti-1", {
        amr: ["otp"],
      });
      const { issueSessionToken } = await import("../../src/session/tokens.js");
      const token = await issueSessionToken(b.registry.signingKeys, {
        issuer: b.config.ISSUER_URL,
        userId: user.userId,
        sessionId,
        appId: made.app.appId,
        scopes: [],
        jti: "jti-1",
        lifetimeSeconds: 300,
        login,
      });
      const asked = await rest(b.baseUrl).call("POST", "/v1/session/stepup/request", {
        bearer: token,
        body: { scope: "svc:pwd:write" },
      });
      expect(asked.status).to.equal(200);
      expect(asked.body.status).to.equal("block");
      expect(hook.connections).to.equal(0);
    } finally {
      await b.stop();
      await hook.close();
    }
  });
});

describe("OutboundGuard", () => {
  it("refuses at connect time a name that resolved to a public address at registration (DNS rebinding)", async () => {
    const listener = await Listener.start();
    let answers = 0;
    // A resolver whose answer changes between registration and delivery, as a rebinding attacker's does.
    const guard = new OutboundGuard("", (host) =>
      Promise.resolve(
        host === "rebind.test"
          ? [{ address: answers++ === 0 ? "93.184.215.14" : "127.0.0.1", family: 4 }]
          : [],
      ),
    );
    const url = `http://rebind.test:${listener.port}/hook`;
    expect(await guard.refusal(url)).to.equal(undefined);
    let refused: unknown;
    try {
      await guard.request(url, { method: "POST", body: "{}", timeoutMs: 2_000 });
    } catch (err) {
      refused = err;
    }
    expect(refused).to.be.instanceOf(OutboundRefused);
    expect(listener.connections).to.equal(0);
    await listener.close();
  });

  it("does not follow redirects: a 3xx is the answer, and its Location is never contacted", async () => {
    const first = await Listener.start();
    const second = await Listener.start();
    first.status = 302;
    first.location = `http://127.0.0.1:${second.port}/elsewhere`;
    const guard = new OutboundGuard("127.0.0.0/8");
    const answer = await guard.request(`http://127.0.0.1:${first.port}/hook`, {
      method: "POST",
      timeoutMs: 2_000,
    });
    expect(answer.status).to.equal(302);
    const fetched = await guard.fetch(`http://127.0.0.1:${first.port}/jwks.json`);
    expect(fetched.status).to.equal(302);
    expect(first.connections).to.equal(2);
    expect(second.connections).to.equal(0);
    await first.close();
    await second.close();
  });

  it("lets OUTBOUND_ALLOWED_CIDRS open a range, and nothing else", () => {
    const guard = new OutboundGuard("10.1.0.0/16");
    expect(guard.allows("10.1.2.3")).to.equal(true);
    expect(guard.allows("10.2.0.1")).to.equal(false);
    expect(guard.allows("::ffff:10.1.2.3")).to.equal(true);
    expect(guard.allows("93.184.215.14")).to.equal(true);
    expect(guard.allows("64:ff9b::7f00:1")).to.equal(false);
    expect(guard.allows("2606:2800:220:1:248:1893:25c8:1946")).to.equal(true);
    // Outside global unicast: site-local, unique local, IPv4-compatible, discard-only, unspecified.
    for (const a of ["fec0::1", "fd12::1", "::7f00:1", "100::1", "::"])
      expect(guard.allows(a), a).to.equal(false);
    // Outside global unicast: site-local, unique local, IPv4-compatible, discard-only.
    for (const a of ["fec0::1", "fd12::1", "::7f00:1", "100::1", "::"])
      expect(guard.allows(a), a).to.equal(false);
  });

  it("OUTBOUND_ALLOWED_CIDRS is validated, naming the variable", () => {
    expect(loadConfig({}).OUTBOUND_ALLOWED_CIDRS).to.deep.equal([]);
    expect(loadConfig({ OUTBOUND_ALLOWED_CIDRS: "127.0.0.0/8" }).OUTBOUND_ALLOWED_CIDRS).to.have.length(1);
    expect(() => loadConfig({ OUTBOUND_ALLOWED_CIDRS: "127.0.0.0/40" }))
      .to.throw(ConfigError)
      .with.property("message")
      .that.matches(/^invalid OUTBOUND_ALLOWED_CIDRS: /);
  });
});
