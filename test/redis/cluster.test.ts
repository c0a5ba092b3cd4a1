import { expect } from "chai";
import { LookupServiceClient } from "../../src/gen/ringfence/lookup/v1/lookup_service.js";
import { startRedisCluster, type RedisCluster } from "../support/redis.js";
import { cliEnv, insecure, metadata, runCli, startTestApp, unary, type TestApp } from "../support/app.js";
import { SmsReceiver } from "../support/receivers.js";
import { HoldRecovery } from "../../src/verify/holds.js";
import { createSmsProvider } from "../../src/messaging/sms.js";
import { silentLogger } from "../../src/log.js";
import { basicAuth, rest, type Json } from "../support/rest.js";
import { FraudPolicy } from "../../src/fraud/policy.js";

describe("on a Redis Cluster", () => {
  let cluster: RedisCluster;
  let app: TestApp;
  let sms: SmsReceiver;

  before(async function () {
    this.timeout(60_000);
    cluster = await startRedisCluster();
    sms = await SmsReceiver.start();
    app = await startTestApp({
      REDIS_CLUSTER_NODES: cluster.nodes,
      SMS_PROVIDER: "http",
      SMS_HTTP_URL: sms.url,
    });
  });
  after(async () => {
    await app.stop();
    await cluster.stop();
    await sms.close();
  });

  const post = (path: string, body: unknown, headers?: Record<string, string>) =>
    rest(app.baseUrl).post(path, body, headers);

  it("sends, checks and bills a V1 code, whose scripts keep to the customer's slot", async () => {
    const { account, apiKey } = await app.registry.accounts.create({
      name: "Cluster",
      balanceMicros: 1_000_000,
      spendingLimitMicros: 1_000_000,
      features: [],
      regions: [],
    });
    const before = sms.messages.length;
    const sent = await post(
      "/v1/authentication",
      {
        customer_uuid: account.customerUuid,
        phone_number: "+33612345678",
        callback_url: "http://127.0.0.1:9/hook",
      },
      { "x-api-key": apiKey },
    );
    expect(sent.body.status).to.equal("pending");
    const code = SmsReceiver.code(await sms.message(before));
    const checked = await post(
      "/v1/check",
      {
        customer_uuid: account.customerUuid,
        authentication_uuid: sent.body.authentication_uuid,
        check_code: code,
      },
      { "x-api-key": apiKey },
    );
    expect(checked.body.status).to.equal("valid");
    expect((await app.registry.accounts.get(account.customerUuid))?.balanceMicros).to.equal(950_000);
  });

  it("drops a customer without holds from the hold index, each script on its own slot", async () => {
    const { account } = await app.registry.accounts.create({
      name: "Cluster holds",
      balanceMicros: 1_000_000,
      spendingLimitMicros: 1_000_000,
      features: [],
      regions: [],
    });
    const { redis, verify: store } = app.registry;
    const customer = account.customerUuid;
    // Listed a minute ago, by a send whose hold is resolved.
    await redis.zadd(store.holdIndexKey(), Date.now() - 60_000, customer);
    const recovery = new HoldRecovery({
      config: app.config,
      store,
      sms: createSmsProvider(app.config, silentLogger),
      secrets: app.registry.secrets,
      log: silentLogger,
    });
    await recovery.sweep();
    expect(await redis.zscore(store.holdIndexKey(), customer)).to.equal(null);
  });

  it("creates, retries and checks a V2 verification by its number, on the customer's slot", async () => {
    const { apiKey } = await app.registry.accounts.create({
      name: "Cluster V2",
      balanceMicros: 1_000_000,
      spendingLimitMicros: 1_000_000,
      features: [],
      regions: [],
    });
    const bearer = { authorization: `Bearer ${apiKey}` };
    const target = { type: "phone_number", value: "+33612345679" };
    const before = sms.messages.length;
    const created = await post(
      "/v2/verification",
      { target, options: { callback_url: "http://127.0.0.1:9/hook" } },
      bearer,
    );
    expect(created.body.status).to.equal("success");
    const retried = await post("/v2/verification", { target }, bearer);
    // Within OTP_RETRY_INTERVAL_SECONDS of the first code: refused, and that code stays.
    expect(retried.body).to.include({ id: created.body.id, status: "blocked", reason: "repeated_attempts" });
    const code = SmsReceiver.code(await sms.message(before));
    const checked = await post("/v2/verification/check", { target, code }, bearer);
    expect(checked.body).to.include({ id: created.body.id, status: "success" });
  });

  it("obeys a fraud policy and reads insights and decisions a page at a time on the tenant's slot", async () => {
    const { account, apiKey } = await app.registry.accounts.create({
      name: "Cluster fraud",
      balanceMicros: 1_000_000,
      spendingLimitMicros: 1_000_000,
      features: [],
      regions: [],
    });
    const tenant = account.customerUuid;
    const keys = app.registry.fraud.keys;
    await new FraudPolicy(app.registry.redis, keys).setGeo(tenant, "FR", "block");
    const bearer = { authorization: `Bearer ${apiKey}` };
    const send = async (value: string) =>
      (await post("/v2/verification", { target: { type: "phone_number", value } }, bearer)).body;
    expect(await send("+33612345680")).to.include({ status: "blocked", reason: "suspicious" });
    expect(await send("+34612345680")).to.include({ status: "success" });
    const groups = [
      { key: "ES", sent: 1, verified: 0, conversion_rate: 0, blocked: 0 },
      { key: "FR", sent: 0, verified: 0, conversion_rate: 0, blocked: 1 },
    ];
    // A page of one, then the next from its token (the rankings are on the tenant's slot).
    const first = await rest(app.baseUrl).get("/v2/insights/verifications?limit=1", bearer);
    expect(first.body.groups).to.deep.equal(groups.slice(0, 1));
    const token = encodeURIComponent(String(first.body.next_page_token));
    const second = await rest(app.baseUrl).get(
      `/v2/insights/verifications?limit=1&page_token=${token}`,
      bearer,
    );
    expect(second.body.groups).to.deep.equal(groups.slice(1));
    expect(second.body).not.to.have.property("next_page_token");
    // Three days: their rankings added up in a scratch key of the same slot.
    const since = new Date(Date.now() - 2 * 86_400_000).toISOString();
    const longer = await rest(app.baseUrl).get(`/v2/insights/verifications?since=${since}`, bearer);
    expect(longer.body.groups).to.deep.equal(groups);
    const decisions = await rest(app.baseUrl).get("/v2/fraud/decisions", bearer);
    expect((decisions.body.decisions as Json[]).map((d) => [d.rule, d.phone_number])).to.deep.equal([
      ["geo", "+3361234**80"],
    ]);
  });

  it("gives accounts on every primary their API key index entry, so read-backs by key find them", async () => {
    const made = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        app.registry.accounts.create({
          name: `Indexed ${String(i)}`,
          balanceMicros: 0,
          spendingLimitMicros: 0,
          features: [],
          regions: [],
        }),
      ),
    );
    // As accounts stored before the index existed: their entries spread over the three primaries.
    for (const { account } of made) {
      await app.registry.redis.del(app.registry.keys.key("apikey", account.apiKeyHash));
    }
    expect(await app.registry.accounts.indexApiKeys()).to.equal(12);
    for (const { account, apiKey } of made) {
      expect((await app.registry.accounts.findByApiKey(apiKey))?.customerUuid).to.equal(account.customerUuid);
    }
    expect(await app.registry.accounts.indexApiKeys()).to.equal(0);
  });

  it("issues server tokens, opens sessions and changes a password", async () => {
    const made = JSON.parse((await runCli(["apps", "create", "--name", "C"], cliEnv(app.config))).stdout) as {
      app_id: string;
      management_api_key: string;
    };
    const client = await post(
      `/v2/session/apps/${made.app_id}/oauth/clients`,
      { client_name: "c", provider_url: "https://c.example.com", grant_types: ["client_credentials"] },
      { authorization: `Bearer ${made.management_api_key}` },
    );
    expect(client.status).to.equal(201);
    const token = await rest(app.baseUrl).call("POST", "/v1/session/oauth/token", {
      form: { grant_type: "client_credentials" },
      headers: basicAuth(String(client.body.client_id), String(client.body.client_secret)),
    });
    expect(token.status).to.equal(200);
    expect(
      (
        await post(
          `/v2/session/apps/${made.app_id}/config/scopes`,
          { scope: "svc:pwd:write" },
          { authorization: `Bearer ${made.management_api_key}` },
        )
      ).status,
    ).to.equal(200);

    const login = async (extra: Record<string, unknown>) => {
      const before = sms.messages.length;
      const started = await post("/v1/session/login/otp", {
        app_id: made.app_id,
        identifier: { type: "phone_number", value: "+33612345679" },
      });
      const code = SmsReceiver.code(await sms.message(before));
      return post("/v1/session/login/otp/check", {
        challenge_token: started.body.challenge_token,
        code,
        ...extra,
      });
    };
    const other = await login({});
    const session = await login({ grant_change_password: true });
    expect(session.body.scope).to.equal("svc:pwd:write");
    const bearer = { authorization: `Bearer ${String(session.body.access_token)}` };
    // The script ends the user's other sessions too: every key it touches is in the user's slot.
    expect(
      (await post("/v1/session/me/password/reset", { password: "cluster-passw0rd" }, bearer)).status,
    ).to.equal(204);
    expect(
      (await post("/v1/session/refresh", { refresh_token: session.body.refresh_token })).status,
    ).to.equal(200);
    expect((await post("/v1/session/refresh", { refresh_token: other.body.refresh_token })).status).to.equal(
      401,
    );
  });

  it("logs in with a password and counts its failures, each window on its own slot", async function () {
    this.timeout(30_000);
    const limited = await startTestApp({
      REDIS_CLUSTER_NODES: cluster.nodes,
      PASSWORD_FAILURES_IDENTIFIER: "2/900",
      PASSWORD_FAILURES_IP: "5/300",
    });
    try {
      const made = JSON.parse(
        (await runCli(["apps", "create", "--name", "P"], cliEnv(limited.config))).stdout,
      ) as {
        app_id: string;
      };
      const phones = ["+33612345001", "+33612345002"];
      for (const phone of phones) {
        const user = await runCli(
          ["users", "create", "--app", made.app_id, "--phone", phone, "--password", "cluster-passw0rd"],
          cliEnv(limited.config),
        );
        expect(user.code, user.stderr).to.equal(0);
      }
      const login = (phone: string, password: string) =>
        rest(limited.baseUrl).post("/v1/session/login/password", {
          app_id: made.app_id,
          identifier: { type: "phone_number", value: phone },
          password,
        });
      expect((await login(phones[0] ?? "", "wrong-passw0rd")).status).to.equal(401);
      expect((await login(phones[0] ?? "", "wrong-passw0rd")).status).to.equal(401);
      expect((await login(phones[0] ?? "", "cluster-passw0rd")).status).to.equal(429);
      const other = await login(phones[1] ?? "", "cluster-passw0rd");
      expect(other.status, other.text).to.equal(200);
    } finally {
      await limited.stop();
    }
  });

  it("keeps accounts, runs their scripts and serves lookups over REST and gRPC", async () => {
    const { accounts, lookupData } = app.registry;
    const made = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        accounts.create({
          name: `C${i}`,
          balanceMicros: 0,
          spendingLimitMicros: 0,
          features: ["cnam"],
          regions: [],
        }),
      ),
    );
    // Scripts on keys of many slots: each must keep to its own hash tag.
    for (const { account } of made) {
      expect(await accounts.credit(account.customerUuid, 1_500_000)).to.equal(1_500_000);
      expect(await accounts.setStatus(account.customerUuid, "active")).to.equal(true);
    }
    await lookupData.put(
      new Map([
        ["+33612345678", { callerName: "Cluster Name" }],
        ["+33612345679", { numberPorted: true }],
        ["+14155552671", { temporaryPhoneNumber: true }],
      ]),
    );
    const first = made[0];
    if (first === undefined) throw new Error("no account");
    const headers = { "customer-uuid": first.account.customerUuid, "x-api-key": first.apiKey };
    const res = await rest(app.baseUrl).get("/v1/lookup/+33612345678?type=cnam", headers);
    expect(res.status).to.equal(200);
    expect(res.body).to.include({ country_code: "FR", mcc: "208", caller_name: "Cluster Name" });

    const client = new LookupServiceClient(app.grpcAddress, insecure);
    const { err, res: answer } = await unary(
      client.lookupPhoneNumber.bind(client),
      { phoneNumber: "+14155552671", type: [] },
      metadata(headers),
    );
    client.close();
    expect(err).to.equal(null);
    expect(answer).to.include({ countryCode: "US", temporaryPhoneNumber: true });
  });
});
