import { expect } from "chai";
import { LookupServiceClient } from "../../src/gen/ringfence/lookup/v1/lookup_service.js";
import { startRedisCluster, waitFor, type RedisCluster } from "../support/redis.js";
import { cliEnv, insecure, metadata, runCli, startTestApp, unary, type TestApp } from "../support/app.js";
import { SmsReceiver } from "../support/receivers.js";
import { HoldRecovery } from "../../src/verify/holds.js";
import { createSmsProvider } from "../../src/messaging/sms.js";
import { soleProvider } from "../support/providers.js";
import { silentLogger } from "../../src/log.js";
import { basicAuth, rest, type Json } from "../support/rest.js";
import { FraudPolicy } from "../../src/fraud/policy.js";
import { fundedAccount, postSend } from "../support/v1.js";
import { SmsPeer } from "../support/sms-peer.js";
import { routedRecovery } from "../support/routed-recovery.js";
import { DeliveryKeys } from "../../src/delivery/keys.js";
import { RouteStore, type Route } from "../../src/delivery/routes.js";
import { DeliveryStats, type HourlyRow } from "../../src/delivery/stats.js";
import { startRoutedApp, type RoutedApp } from "../support/routing.js";
import { ORIGIN, PasskeyRig, REFUSED } from "../support/passkeys.js";
import { decodeJwt } from "jose";

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
      sms: soleProvider(createSmsProvider(app.config, silentLogger)),
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
    // A refresh token presented five times at once within REFRESH_REUSE_GRACE_SECONDS: one
    // successor, the same answer each (docs/session-api.md#refresh), on the user's slot.
    const third = await login({});
    const answers = await Promise.all(
      Array.from({ length: 5 }, () =>
        post("/v1/session/refresh", { refresh_token: third.body.refresh_token }),
      ),
    );
    for (const a of answers) expect(a.status, a.text).to.equal(200);
    expect(new Set(answers.map((a) => a.text)).size).to.equal(1);
    expect(
      (await post("/v1/session/refresh", { refresh_token: answers[0]?.body.refresh_token })).status,
    ).to.equal(200);
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

  it("registers a passkey and logs in with it (docs/session-api.md#passkeys), each key on its own slot", async () => {
    const rig = PasskeyRig.over(app);
    const { appId } = await rig.newApp();
    const u = await rig.user(appId);
    const id = await rig.register(u, { counter: 1 });
    expect((await rig.list(u)).map((p) => p.id)).to.deep.equal([id]);
    const logged = await rig.loginAs(u);
    expect(logged.status, JSON.stringify(logged.body)).to.equal(200);
    expect(decodeJwt(String(logged.body.access_token))).to.include({ sub: u.userId, acr: "2" });
    const refreshed = await post("/v1/session/refresh", { refresh_token: logged.body.refresh_token });
    expect(refreshed.status, refreshed.text).to.equal(200);
    // The counter script on the user's slot: a counter going backwards is refused, the stored one kept.
    const back = await rig.login(appId, (o) => u.auth.get(o, { origin: ORIGIN, counter: 1 }));
    expect(back.body).to.deep.equal(REFUSED);
    expect((await rig.stored(u, id))?.counter).to.equal(2);
    const removed = await rig.call("DELETE", `/v1/session/me/passkeys/${id}`, { bearer: u.bearer });
    expect(removed.status).to.equal(204);
    expect((await rig.loginAs(u)).status).to.equal(401);
  });

  it("lets exactly one of two concurrent passkey logins answering one challenge token succeed", async () => {
    const rig = PasskeyRig.over(app);
    const { appId } = await rig.newApp();
    const u = await rig.user(appId);
    // An authenticator that keeps no counter: both answers pass every check but the challenge's.
    await rig.register(u, { counter: 0 });
    const sessions = await rig.sessions(u.userId);
    const { challenge_token, options } = await rig.loginOptions(appId);
    const answers = [0, 1].map(() => u.auth.get(options, { origin: ORIGIN, counter: 0 }));
    const results = await Promise.all(answers.map((a) => rig.loginAnswer(challenge_token, a)));
    expect(results.map((r) => r.status).sort()).to.deep.equal([200, 401]);
    expect(results.find((r) => r.status === 401)?.body).to.deep.equal(REFUSED);
    expect(await rig.sessions(u.userId)).to.equal(sessions + 1);
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

  describe("with two delivery providers", () => {
    let routed: RoutedApp;
    const peers: Record<"alpha" | "beta", SmsPeer> = {} as never;
    let entries: { name: string; url: string; timeout_ms: number }[];
    let customer: { uuid: string; apiKey: string };
    let routes: RouteStore;
    let next = 70_000_000;
    /** A French mobile number of a range no prefix route below matches; `+34` for a Spanish one. */
    const fresh = (cc = "+336") => `${cc}${String((next += 1))}`;

    before(async function () {
      this.timeout(30_000);
      peers.alpha = await SmsPeer.start();
      peers.beta = await SmsPeer.start();
      entries = [
        { name: "alpha", url: peers.alpha.url, timeout_ms: 300 },
        { name: "beta", url: peers.beta.url, timeout_ms: 2_000 },
      ];
      routed = await startRoutedApp({
        REDIS_CLUSTER_NODES: cluster.nodes,
        DELIVERY_PROVIDERS: JSON.stringify(entries),
        // The circuits stay closed whatever the tests make a provider answer; recovery runs when they say.
        PROVIDER_CIRCUIT_FAILURES: "1000",
        SMS_HOLD_RECOVERY_INTERVAL_MS: "0",
      });
      const { account, apiKey } = await fundedAccount(routed.registry.accounts, "Cluster routes");
      customer = { uuid: account.customerUuid, apiKey };
      routes = new RouteStore(routed.registry.redis, new DeliveryKeys(routed.registry.keys));
    });
    after(async () => {
      await routed.stop();
      await Promise.all([peers.alpha.close(), peers.beta.close()]);
    });
    beforeEach(() => {
      for (const p of Object.values(peers)) p.answer = () => 200;
    });

    const send = (phone: string) =>
      postSend(routed.baseUrl, customer.apiKey, { customer_uuid: customer.uuid, phone_number: phone });
    /** Which providers were posted a message to `phone`, in the order they were tried. */
    const tried = (phone: string) =>
      (["alpha", "beta"] as const).filter((n) => peers[n].to(phone).length > 0);
    const carrier = async (phone: string) => {
      expect((await send(phone)).status).to.equal(200);
      return tried(phone).at(-1);
    };
    const balance = async () => (await routed.registry.accounts.get(customer.uuid))?.balanceMicros ?? 0;
    const stats = (now?: () => number) =>
      new DeliveryStats(routed.registry.redis, new DeliveryKeys(routed.registry.keys), {
        windowSeconds: routed.config.ROUTE_WINDOW_SECONDS,
        retentionDays: routed.config.DELIVERY_STATS_RETENTION_DAYS,
        ...(now === undefined ? {} : { now }),
      });

    it("keeps routes on the cluster, and every send follows the one in force", async () => {
      const sms = { channel: "sms" } as const;
      const france: Route = { ...sms, destination: "FR", providers: ["beta", "alpha"], strategy: "failover" };
      const prefix: Route = {
        ...sms,
        destination: "+3361",
        providers: ["alpha", "beta"],
        strategy: "weighted",
        weights: [70, 30],
      };
      await routes.set(france);
      await routes.set(prefix);
      expect(await routes.list()).to.deep.equal([prefix, france]);
      // Announced on the cluster, else read again within a second: France goes to beta first.
      await waitFor(async () => (await carrier(fresh())) === "beta", 3_000);
      expect(await carrier(fresh())).to.equal("beta");
      expect(await carrier(fresh("+346"))).to.equal("alpha");
      expect(await routes.remove("sms", "FR")).to.equal(true);
      expect(await routes.remove("sms", "FR")).to.equal(false);
      expect(await routes.list()).to.deep.equal([prefix]);
      expect(await routes.remove("sms", "+3361")).to.equal(true);
      expect(await routes.list()).to.deep.equal([]);
      await waitFor(async () => (await carrier(fresh())) === "alpha", 3_000);
    });

    it("writes per-provider delivery counters on the cluster and reads them back by hour and by window", async () => {
      // A fixed hour, so that the counts of one hour stay in one key; hours are keys on other slots.
      const t = Date.UTC(2031, 0, 1, 12, 30);
      let clock = t - 2 * 3_600_000;
      const s = stats(() => clock);
      const at = { channel: "sms", country: "FR", route: "FR" };
      s.add({ ...at, provider: "alpha" }, { sent: 2, accepted: 1, cost: 40_000 }, { s: 2, a: 1 });
      clock = t;
      s.add({ ...at, provider: "alpha" }, { verified: 1 }, { v: 1 });
      s.add({ ...at, provider: "beta" }, { sent: 1, accepted: 1, delivered: 1 }, { s: 1, a: 1 });
      // One script call per hash: the hour two hours ago and its slice, this hour and its slice.
      await s.flush();
      const zero = { sent: 0, accepted: 0, delivered: 0, undelivered: 0, rejected: 0, verified: 0, cost: 0 };
      const rows = (since: number) =>
        s.hourly("sms", since, t).then((r) => r.sort((a, b) => a.provider.localeCompare(b.provider)));
      const place = { country: "FR", route: "FR" };
      expect(await rows(t - 2 * 3_600_000)).to.deep.equal([
        { provider: "alpha", ...place, ...zero, sent: 2, accepted: 1, cost: 40_000, verified: 1 },
        { provider: "beta", ...place, ...zero, sent: 1, accepted: 1, delivered: 1 },
      ] satisfies HourlyRow[]);
      expect(await rows(t)).to.deep.equal([
        { provider: "alpha", ...place, ...zero, verified: 1 },
        { provider: "beta", ...place, ...zero, sent: 1, accepted: 1, delivered: 1 },
      ] satisfies HourlyRow[]);
      // The conversion window (ROUTE_WINDOW_SECONDS, an hour) leaves out what is two hours old.
      expect(Object.fromEntries(await s.figures("sms", "FR"))).to.deep.equal({
        alpha: { sent: 0, accepted: 0, verified: 1 },
        beta: { sent: 1, accepted: 1, verified: 0 },
      });
      const hour = new DeliveryKeys(routed.registry.keys).hourly("sms", Math.floor(t / 3_600_000));
      const retention = routed.config.DELIVERY_STATS_RETENTION_DAYS * 86_400;
      expect(await routed.registry.redis.ttl(hour)).to.be.within(1, retention);
    });

    it("counts a right code as verified for the provider that carried it, after a failover", async () => {
      // A route of this test's own, so that no other test's sends (counted within a second, in the
      // background) land in its figures: Spanish mobile numbers, alpha then beta.
      const route = "+346";
      // Spanish mobile numbers, each in a range of its own (SPAM_RANGE_BURST never refuses one).
      let k = 1000;
      const spanish = () => `+3467${String((k += 1))}000`;
      await routes.set({
        channel: "sms",
        destination: route,
        providers: ["alpha", "beta"],
        strategy: "failover",
      });
      // Per provider: this hour's sent, accepted and verified, then the same over the conversion window.
      const counts = async () => {
        const rows = await stats().hourly("sms", Date.now() - 3_600_000, Date.now() + 3_600_000);
        const window = await stats().figures("sms", route);
        return (["alpha", "beta"] as const).map((p) => {
          const h = rows.find((r) => r.provider === p && r.country === "ES" && r.route === route);
          const w = window.get(p);
          return [h?.sent, h?.accepted, h?.verified, w?.sent, w?.accepted, w?.verified].map((n) => n ?? 0);
        });
      };
      // Every instance obeys the route within a second: a send counted under it says so.
      await waitFor(async () => {
        const probe = await send(spanish());
        expect(probe.body.status, probe.text).to.equal("pending");
        return (await counts()).some((c) => c[0] !== 0);
      });
      // The counts the service still holds written now (it writes them every second).
      await routed.refresh();
      const before = await counts();
      const phone = spanish();
      peers.alpha.answer = () => 503;
      const sent = await send(phone);
      expect(sent.status, sent.text).to.equal(200);
      expect(tried(phone)).to.deep.equal(["alpha", "beta"]);
      const [message] = peers.beta.to(phone);
      const checked = await rest(routed.baseUrl).post(
        "/v1/check",
        {
          customer_uuid: customer.uuid,
          authentication_uuid: sent.body.authentication_uuid,
          check_code: message === undefined ? "" : SmsReceiver.code(message),
        },
        { "x-api-key": customer.apiKey },
      );
      expect(checked.body.status).to.equal("valid");
      const plus = (was: number[] | undefined, by: number[]) => by.map((n, j) => n + (was?.[j] ?? 0));
      // alpha: one more sent; beta: one more sent, accepted and verified, this hour and in the window.
      const expected = [plus(before[0], [1, 0, 0, 1, 0, 0]), plus(before[1], [1, 1, 1, 1, 1, 1])];
      await routed.refresh();
      expect(await counts()).to.deep.equal(expected);
      expect(await routes.remove("sms", route)).to.equal(true);
    });

    it("moves a charged message's hold to the next provider, and recovers it through that one", async () => {
      const phone = fresh("+346");
      const start = await balance();
      peers.alpha.answer = () => 503;
      peers.beta.answer = () => "hang";
      // The call hangs at beta as a service that died mid-call would leave it (a submit that times
      // out while the service lives is given up: docs/routing.md#availability).
      const hanging = send(phone);
      const { verify, redis } = routed.registry;
      const held = async () => (await redis.zrange(verify.holdsKey(customer.uuid), "0", "-1"))[0] ?? "";
      await waitFor(async () => peers.beta.count(await held()) === 1);
      const reference = await held();
      expect(await redis.hget(verify.holdKey(customer.uuid, reference), "provider")).to.equal("beta");
      const price = start - (await balance());
      expect(price).to.be.greaterThan(0);
      // alpha answers now too: the recovery asks beta, which the hold names, again.
      peers.alpha.answer = () => 200;
      peers.beta.answer = () => 200;
      expect(await routedRecovery(routed, entries, 60_000).sweep()).to.equal(1);
      expect([peers.alpha.count(reference), peers.beta.count(reference)]).to.deep.equal([1, 2]);
      expect(await balance()).to.equal(start - price);
      expect(await redis.zcard(verify.holdsKey(customer.uuid))).to.equal(0);
      const owner = await verify.messageOwner("beta", reference);
      expect(owner).to.include({ customer: customer.uuid, attempt: 1 });
      // The owner's call, answered once beta's timeout passes, changes nothing of the resolved hold.
      await hanging;
      expect(await balance()).to.equal(start - price);
    });
  });
});
