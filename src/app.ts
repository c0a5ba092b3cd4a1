import type { Server as HttpServer, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { DEV_ONLY, type Config } from "./config.js";
import { isRedisUnavailable } from "./errors.js";
import type { Logger } from "./log.js";
import { Secrets } from "./crypto/secrets.js";
import { checkSecretsKey } from "./crypto/key-check.js";
import { connectRedis, createRedis, Keys, reportRedisErrors, type RedisClient } from "./redis/client.js";
import { RedisAccountStore } from "./accounts/store.js";
import { AccountCache } from "./accounts/cache.js";
import { RedisLookupData } from "./lookup/lookup-data.js";
import { lookupHandlers } from "./lookup/service.js";
import { preloadNumberData } from "./lookup/numbers.js";
import { LookupServiceService } from "./gen/ringfence/lookup/v1/lookup_service.js";
import { bindService, handlersOf, type ServiceBinding } from "./rpc/binding.js";
import { CALLERS, SUCCESS_STATUSES } from "./rpc/surface.js";
import { loadContract } from "./rpc/contract.js";
import { startGrpc } from "./grpc/server.js";
import { blockList } from "./net/cidr.js";
import { OutboundGuard } from "./net/outbound.js";
import { createGateway } from "./gateway/gateway.js";
import { allOf, elapsedMs, type CallObserver } from "./observability/calls.js";
import { Metrics } from "./observability/metrics.js";
import { requestLog } from "./observability/request-log.js";
import { startAdmin, type AdminServer } from "./observability/admin.js";
import { guardedEmail, guardedSms } from "./messaging/guarded.js";
import { v1ServiceOptions } from "./v1/deprecation.js";
import {
  apiKeyAuthenticator,
  bearerKeyAuthenticator,
  bodyCustomerUuid,
  customerAuthenticator,
} from "./accounts/authenticate.js";
import { sessionAuthenticator } from "./session/tokens.js";
import { VerifyServiceService } from "./gen/ringfence/verify/v1/verify_service.js";
import { VerifyStore } from "./verify/store.js";
import { verifyHandlers, VerifyEngine, type VerifyDeps } from "./verify/service.js";
import { verificationHandlers } from "./verify/v2.js";
import { lookupV2Handlers } from "./lookup/v2.js";
import { VerificationServiceService } from "./gen/ringfence/verify/v2/verification_service.js";
import { LookupServiceService as LookupV2Service } from "./gen/ringfence/lookup/v2/lookup_service.js";
import { createSmsProvider, ShutdownGate, type SmsProvider } from "./messaging/sms.js";
import { WebhookOutbox } from "./webhooks/outbox.js";
import { HoldRecovery } from "./verify/holds.js";
import { createBlockingRedis } from "./redis/client.js";
import { AppStore } from "./apps/store.js";
import { ClientStore } from "./oauth/clients.js";
import { RedisSigningKeys } from "./oauth/keys/signing-keys.js";
import { CachedKeySet } from "./oauth/keys/key-set.js";
import { oauthHandlers } from "./oauth/service.js";
import { TokenFailures } from "./oauth/failures.js";
import { OAuthServiceService } from "./gen/ringfence/oauth/v1/oauth_service.js";
import { SessionServiceService } from "./gen/ringfence/session/v1/session_service.js";
import { StepUpServiceService } from "./gen/ringfence/stepup/v1/stepup_service.js";
import { APP_WEBHOOK_REF_KIND, AppWebhooks, appWebhookSecret } from "./apps/webhooks.js";
import { SecretResolvers } from "./webhooks/stream.js";
import { KeyFailures } from "./accounts/key-failures.js";
import { appHandlerSets } from "./apps/handlers.js";
import { ACCOUNT_SECRET_KIND } from "./accounts/account.js";
import { createEmailProvider, type EmailProvider } from "./messaging/email.js";
import { UserStore } from "./session/users.js";
import { SessionStore } from "./session/sessions.js";
import { ChallengeStore } from "./session/challenges.js";
import { CodeSender } from "./session/delivery.js";
import { sessionHandlers } from "./session/service.js";
import { stepUpHandlers } from "./stepup/service.js";
import { DelegationClient } from "./stepup/delegation.js";
import { StepUpChallenges } from "./stepup/challenges.js";
import { StepUpConfigStore } from "./stepup/store.js";
import { StepUpLimits } from "./stepup/limits.js";

/** Everything the domains need, built once from the validated config. */
export interface Registry {
  config: Config;
  log: Logger;
  redis: RedisClient;
  /**
   * A connection of its own for what a call writes after its answer is decided (a token's lease
   * and address place given back). ioredis keeps one auto-pipeline in flight per connection: on
   * `redis`, a batch of them would hold the next call's batch back a round trip; here they are
   * batched among themselves. Connects on first use.
   */
  afterAnswer: RedisClient;
  keys: Keys;
  secrets: Secrets;
  accounts: RedisAccountStore;
  /** The accounts V1 callers authenticate with, kept in the process (see AccountCache). */
  accountCache: AccountCache;
  lookupData: RedisLookupData;
  verify: VerifyStore;
  apps: AppStore;
  clients: ClientStore;
  signingKeys: RedisSigningKeys;
  users: UserStore;
  sessions: SessionStore;
  challenges: ChallengeStore;
  /** Calls to caller-supplied URLs: checked at registration and at connect time. */
  outbound: OutboundGuard;
  /** This process's Prometheus metrics (served on ADMIN_PORT). */
  metrics: Metrics;
}

export async function openRegistry(config: Config, log: Logger): Promise<Registry> {
  const metrics = new Metrics();
  const counted = () => {
    metrics.redisError();
  };
  const redis = createRedis(config);
  reportRedisErrors(redis, log, "main", counted);
  await connectRedis(redis);
  const afterAnswer = createRedis(config);
  reportRedisErrors(afterAnswer, log, "after-answer", counted);
  const keys = new Keys(config.REDIS_KEY_PREFIX);
  const secrets = new Secrets(config.SECRETS_KEY);
  const accounts = new RedisAccountStore(redis, keys, secrets);
  const signingKeys = new RedisSigningKeys(redis, keys, secrets, {
    tokenLifetimeSeconds: Math.max(config.ACCESS_TOKEN_TTL_SECONDS, config.SESSION_TOKEN_TTL_SECONDS),
  });
  // The service and the CLI alike stop here when the data was sealed with another SECRETS_KEY.
  try {
    await checkSecretsKey(redis, keys, secrets, {
      prefix: config.REDIS_KEY_PREFIX,
      opensStoredData: () => signingKeys.opensWithThisKey(),
    });
  } catch (err) {
    redis.disconnect();
    afterAnswer.disconnect();
    throw err;
  }
  return {
    config,
    log,
    redis,
    afterAnswer,
    keys,
    secrets,
    accounts,
    accountCache: new AccountCache(accounts, secrets),
    lookupData: new RedisLookupData(redis, keys),
    verify: new VerifyStore(redis, keys),
    apps: new AppStore(redis, keys, secrets),
    clients: new ClientStore(redis, keys, secrets),
    signingKeys,
    users: new UserStore(redis, keys),
    sessions: new SessionStore(redis, keys, config.REFRESH_TOKEN_TTL_SECONDS * 1000),
    challenges: new ChallengeStore(redis, keys),
    outbound: new OutboundGuard(config.OUTBOUND_ALLOWED_CIDRS),
    metrics,
  };
}

/** The owners of the secrets that sign webhook streams, by the kind of their `secret_ref`. */
function secretResolvers(r: Registry): SecretResolvers {
  return new SecretResolvers()
    .register(ACCOUNT_SECRET_KIND, (customerUuid) => r.accounts.webhookSecret(customerUuid))
    .register(APP_WEBHOOK_REF_KIND, (_id, ref) => appWebhookSecret(r.redis, r.keys, r.secrets, ref));
}

/** The parts that talk to the outside and run in the background: not built for one CLI command. */
export interface Delivery {
  sms: SmsProvider;
  email: EmailProvider;
  outbox: WebhookOutbox;
}

/**
 * `sweep`: whether this process runs the outbox's recovery sweeps (one process per instance does;
 * see StartOptions). Its BullMQ worker runs in every process either way.
 */
export function openDelivery(r: Registry, gate?: ShutdownGate, sweep = true): Delivery {
  const { config, log, metrics } = r;
  const outbox = new WebhookOutbox({
    redis: r.redis,
    connection: () => createBlockingRedis(config),
    keys: r.keys,
    queuePrefix: `{${config.REDIS_KEY_PREFIX}bull}`,
    resolveSecret: secretResolvers(r).resolve,
    log,
    outbound: r.outbound,
    timeoutMs: config.WEBHOOK_TIMEOUT_MS,
    concurrency: config.WEBHOOK_CONCURRENCY,
    sweepIntervalMs: config.WEBHOOK_SWEEP_INTERVAL_MS,
    sweep,
    backoff: {
      baseMs: config.WEBHOOK_BACKOFF_BASE_MS,
      maxDelayMs: config.WEBHOOK_BACKOFF_MAX_MS,
      giveUpAfterMs: config.WEBHOOK_GIVE_UP_MS,
    },
    onAttempt: (outcome) => {
      metrics.webhook(outcome);
    },
  });
  metrics.webhookBacklog = () => outbox.backlog();
  return {
    sms: guardedSms(createSmsProvider(config, log, gate), metrics),
    email: guardedEmail(createEmailProvider(config, log, gate), metrics),
    outbox,
  };
}

export function services(r: Registry, d: Delivery): ServiceBinding[] {
  const verify: VerifyDeps = {
    config: r.config,
    log: r.log,
    accounts: r.accounts,
    secrets: r.secrets,
    lookupData: r.lookupData,
    store: r.verify,
    sms: d.sms,
    webhooks: d.outbox,
    outbound: r.outbound,
    metrics: r.metrics,
  };
  const engine = new VerifyEngine(verify);
  d.sms.onReceipt((receipt) => {
    engine.recordReceipt(receipt).catch((err: unknown) => {
      r.log[isRedisUnavailable(err) ? "warn" : "error"]("delivery receipt not recorded", {
        error: err instanceof Error ? err.message : String(err),
      });
    });
  });
  // Streams must outlive the longest retry window of the outbox.
  const events = new AppWebhooks(r.redis, r.keys, r.secrets, d.outbox, r.log, {
    streamTtlMs: Math.max(25 * 3_600_000, r.config.WEBHOOK_GIVE_UP_MS + 3_600_000),
  });
  const codes = new CodeSender({
    config: r.config,
    log: r.log,
    redis: r.redis,
    keys: r.keys,
    sms: d.sms,
    email: d.email,
    lookupData: r.lookupData,
    apps: r.apps,
  });
  const appSets = appHandlerSets({ apps: r.apps, webhooks: events, outbound: r.outbound });
  const keySet = new CachedKeySet(r.signingKeys);
  const stepUpChallenges = new StepUpChallenges(r.redis, r.keys);
  const session = {
    keySet,
    config: r.config,
    log: r.log,
    redis: r.redis,
    secrets: r.secrets,
    apps: r.apps,
    users: r.users,
    sessions: r.sessions,
    challenges: r.challenges,
    codes,
    events,
  };
  // Who may call what: one authenticator per kind of caller, declared per method below. Every
  // authentication by an account's API key counts its failures per client address.
  const keyFailures = new KeyFailures(r.redis, r.keys, r.config.API_KEY_FAILURES_IP);
  const customer = keyFailures.guard(customerAuthenticator(r.accountCache, r.secrets, bodyCustomerUuid));
  const user = sessionAuthenticator({ keySet, sessions: r.sessions, issuer: r.config.ISSUER_URL });
  const app = r.apps.managementKey;
  // V2 callers send their API key as a bearer token.
  const bearer = keyFailures.guard(bearerKeyAuthenticator(r.accountCache));
  const lookup = { accounts: r.accounts, secrets: r.secrets, data: r.lookupData };
  return [
    bindService(VerifyServiceService, verifyHandlers(engine), {
      ...v1ServiceOptions(r.config, "verify"),
      callers: CALLERS["ringfence.verify.v1.VerifyService"],
      authenticators: { account: customer },
      // A read-back names no customer: the key alone finds the account.
      methodAuthenticators: {
        getAuthentication: keyFailures.guard(apiKeyAuthenticator(r.accountCache, r.secrets)),
      },
    }),
    bindService(
      SessionServiceService,
      handlersOf(
        SessionServiceService,
        sessionHandlers({ ...session, stepUpTokens: stepUpChallenges, signingKeys: r.signingKeys }),
        appSets.session,
      ),
      {
        dialect: "session",
        successStatuses: SUCCESS_STATUSES["ringfence.session.v1.SessionService"],
        callers: CALLERS["ringfence.session.v1.SessionService"],
        authenticators: {
          session: user,
          app,
        },
      },
    ),
    bindService(
      StepUpServiceService,
      stepUpHandlers({
        ...session,
        challenges: stepUpChallenges,
        configs: new StepUpConfigStore(r.redis, r.keys),
        limits: new StepUpLimits({ config: r.config, redis: r.redis, keys: r.keys, codes }),
        outbound: r.outbound,
        delegation: new DelegationClient({ keys: r.signingKeys, logger: r.log, fetch: r.outbound.fetch }),
      }),
      {
        dialect: "session",
        successStatuses: SUCCESS_STATUSES["ringfence.stepup.v1.StepUpService"],
        callers: CALLERS["ringfence.stepup.v1.StepUpService"],
        authenticators: {
          session: user,
          app,
        },
      },
    ),
    bindService(
      OAuthServiceService,
      handlersOf(
        OAuthServiceService,
        oauthHandlers({
          apps: r.apps,
          clients: r.clients,
          failures: new TokenFailures(r.redis, r.keys, {
            perClient: r.config.TOKEN_FAILURES_CLIENT,
            perAddress: r.config.TOKEN_FAILURES_IP,
          }),
          keys: r.signingKeys,
          issuer: r.config.ISSUER_URL,
          lifetimeSeconds: r.config.ACCESS_TOKEN_TTL_SECONDS,
          events,
        }),
        appSets.oauth,
      ),
      {
        dialect: "session",
        methodDialects: { createToken: "oauth" },
        successStatuses: SUCCESS_STATUSES["ringfence.oauth.v1.OAuthService"],
        // The token endpoint authenticates its client as part of the grant (RFC 6749 section
        // 2.3, with its failure windows): createToken has no caller before it.
        callers: CALLERS["ringfence.oauth.v1.OAuthService"],
        authenticators: { app },
      },
    ),
    bindService(VerificationServiceService, verificationHandlers(engine), {
      dialect: "v2",
      callers: CALLERS["ringfence.verify.v2.VerificationService"],
      authenticators: {
        account: bearer,
      },
    }),
    bindService(LookupV2Service, lookupV2Handlers(lookup), {
      dialect: "v2",
      callers: CALLERS["ringfence.lookup.v2.LookupService"],
      authenticators: { account: bearer },
    }),
    bindService(LookupServiceService, lookupHandlers(lookup), {
      ...v1ServiceOptions(r.config, "lookup"),
      callers: CALLERS["ringfence.lookup.v1.LookupService"],
      authenticators: {
        // A lookup names its customer in a header: GET has no body.
        account: keyFailures.guard(
          customerAuthenticator(r.accountCache, r.secrets, (_req, ctx) => ctx.header("customer-uuid")),
        ),
      },
    }),
  ];
}

export interface RunningApp {
  grpcPort: number;
  /** undefined when HTTP_PORT=0 (Envoy in front instead). */
  httpPort: number | undefined;
  /** undefined when ADMIN_PORT=0, or in a cluster worker (the primary serves it). */
  adminPort: number | undefined;
  registry: Registry;
  /**
   * Stops taking calls, lets in-flight ones finish, then closes the outbox, providers and Redis,
   * all within SHUTDOWN_GRACE_MS. Resolves false when something had to be cut at the deadline.
   */
  stop(): Promise<boolean>;
}

export interface StartOptions {
  /**
   * Whether this process runs the instance's scans: held-message recovery, the webhook recovery
   * sweep and the API-key index. Default true. With WORKERS > 1 only worker 1 (and whichever
   * worker replaces it) does, so that they are not run WORKERS times over (src/workers.ts).
   */
  singletonDuties?: boolean;
  /**
   * Whether this process serves ADMIN_PORT. Default true. Cluster workers do not: the primary
   * serves it for the instance, metrics gathered from every worker (src/workers.ts).
   */
  admin?: boolean;
}

export async function startApp(config: Config, log: Logger, options: StartOptions = {}): Promise<RunningApp> {
  const singleton = options.singletonDuties ?? true;
  for (const name of config.devDefaults) {
    log.warn(`${name}: ${DEV_ONLY[name] ?? "development default"}. Never run like this in production.`);
  }
  const registry = await openRegistry(config, log);
  // Build the static number indexes now rather than on the first caller's lookup.
  await preloadNumberData();
  // The first signing key exists before the first token; a wrong SECRETS_KEY fails here, not per call.
  // Every worker: installing the first key is one script that keeps a key another got there first with.
  await registry.signingKeys.current();
  // Key rotations, account changes and number imports made by other instances or the CLI reach
  // this one at once (a connection of its own); each worker keeps its own copies, so each watches.
  const subscriber = createRedis(config);
  reportRedisErrors(subscriber, log, "subscriber", () => {
    registry.metrics.redisError();
  });
  const unwatches = await Promise.all([
    registry.signingKeys.watch(subscriber),
    registry.accountCache.watch(subscriber),
    registry.lookupData.watch(subscriber),
  ]);
  const unwatch = async () => {
    await Promise.all(unwatches.map((stop) => stop()));
  };
  const gate = new ShutdownGate();
  // Every worker delivers webhooks (and, with SMS_PROVIDER=smpp, holds its own bind): BullMQ gives
  // a job to one worker, and a per-stream lock in Redis keeps one delivery at a time per stream.
  const delivery = openDelivery(registry, gate, singleton);
  await delivery.outbox.start();
  // Charged V1 messages whose provider answer was never recorded (a crash, a timeout). Claims are
  // atomic, so two instances never re-send one hold; one pass per instance is still enough.
  const holds = new HoldRecovery({
    config,
    store: registry.verify,
    sms: delivery.sms,
    secrets: registry.secrets,
    log,
  });
  if (singleton) holds.start();
  // V1 read-backs find the account by its key: accounts stored before that index get their entry.
  // In the background, so that a start never waits for a scan of the whole keyspace.
  if (singleton) {
    registry.accounts.indexApiKeys().then(
      (indexed) => {
        if (indexed > 0) log.info("API keys indexed", { accounts: indexed });
      },
      (err: unknown) => {
        log.warn("API key index not completed; the next start completes it", {
          error: err instanceof Error ? err.message : String(err),
        });
      },
    );
    // Sends skip the number's data unless its prefix has overrides: records imported before the
    // prefixes existed get theirs (until then every send reads its number's data).
    registry.lookupData.completeOverridePrefixes().then(
      (read) => {
        if (read > 0) log.info("number override prefixes completed", { records: read });
      },
      (err: unknown) => {
        log.warn("number override prefixes not completed; the next start completes them", {
          error: err instanceof Error ? err.message : String(err),
        });
      },
    );
  }
  const bindings = services(registry, delivery);
  const contract = loadContract();
  // Told of every answered call on either transport (metrics, the request log), in this order.
  const observers: CallObserver[] = [registry.metrics.observe, requestLog(log)];
  const deps = { log, docsUrl: config.DOCS_URL, observe: allOf(observers) };
  const grpc = await startGrpc(
    bindings,
    { host: config.HOST, port: config.GRPC_PORT },
    {
      ...deps,
      descriptor: contract.bytes,
      maxReceiveBytes: config.MAX_BODY_BYTES,
      trustedProxies: blockList(config.TRUSTED_PROXY_CIDRS),
    },
  );

  const { redis } = registry;
  let stopping = false;
  // Per process: gRPC health and /readyz answer for the worker that took the connection, by its
  // own Redis connection and its own shutdown.
  const watchdog = new RedisWatchdog(redis, log, (up) => {
    if (!stopping) grpc.setServing(up ? "SERVING" : "NOT_SERVING");
  });
  watchdog.onPing = (seconds) => {
    registry.metrics.redisPinged(seconds);
  };
  const ready = () => Promise.resolve(!stopping && watchdog.up);
  grpc.setServing("SERVING");
  watchdog.start();
  // A closed socket needs no ping to know; a new one is trusted once it answers one.
  redis.on("close", () => {
    if (!stopping) watchdog.report(false);
  });
  redis.on("ready", () => {
    void watchdog.probe();
  });

  let http: HttpServer | undefined;
  const inFlight = new Set<ServerResponse>();
  if (config.HTTP_PORT !== 0) {
    http = createGateway(bindings, {
      ...deps,
      maxBodyBytes: config.MAX_BODY_BYTES,
      headersTimeoutMs: config.HTTP_HEADERS_TIMEOUT_MS,
      requestTimeoutMs: config.HTTP_REQUEST_TIMEOUT_MS,
      contract,
      ready,
    });
    const server = http;
    // Runs before the gateway's handler: once shutdown began, every answer closes its connection.
    server.prependListener("request", (_req, res: ServerResponse) => {
      if (stopping) res.setHeader("connection", "close");
      inFlight.add(res);
      res.once("close", () => inFlight.delete(res));
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(config.HTTP_PORT, config.HOST, () => {
        resolve();
      });
    });
  }
  const httpPort = http === undefined ? undefined : (http.address() as AddressInfo).port;
  let admin: AdminServer | undefined;
  if (config.ADMIN_PORT !== 0 && (options.admin ?? true)) {
    admin = await startAdmin(
      { host: config.HOST, port: config.ADMIN_PORT },
      { metrics: () => registry.metrics.exposition(), ready },
      log,
    );
  }
  log.info("ringfence started", { grpcPort: grpc.port, httpPort, adminPort: admin?.port, host: config.HOST });

  let stopped: Promise<boolean> | undefined;
  const stop = () =>
    (stopped ??= (async () => {
      // Everything, closing steps included, fits in SHUTDOWN_GRACE_MS from here; the calls in
      // flight get the grace less what closing the outbox, providers and Redis may need.
      const startedMs = Date.now();
      const deadlineMs = startedMs + config.SHUTDOWN_GRACE_MS;
      const drainEndsMs = deadlineMs - Math.min(1_000, Math.floor(config.SHUTDOWN_GRACE_MS / 4));
      // Webhook deliveries in flight may finish until shortly before the deadline; what follows
      // them (closing providers and Redis) takes a few round trips.
      const outboxEndsMs = deadlineMs - Math.min(250, Math.floor(config.SHUTDOWN_GRACE_MS / 8));
      stopping = true;
      gate.begin(drainEndsMs);
      watchdog.stop();
      grpc.setServing("NOT_SERVING");
      let clean = true;
      for (const res of inFlight) {
        if (!res.headersSent) res.setHeader("connection", "close");
      }
      const drained = Promise.all([
        new Promise<void>((resolve) => {
          grpc.server.tryShutdown(() => {
            resolve();
          });
        }),
        new Promise<void>((resolve) => {
          if (http === undefined) {
            resolve();
            return;
          }
          http.close(() => {
            resolve();
          });
          http.closeIdleConnections();
        }),
      ]);
      if (!(await within(drained, drainEndsMs - Date.now()))) {
        log.warn("shutdown grace period over: closing remaining calls");
        clean = false;
        grpc.server.forceShutdown();
        http?.closeAllConnections();
      }
      // With Redis gone the queue cannot close cleanly; what it had stays in Redis for the next start.
      const closing = (async () => {
        // Settlements of held charges that Redis did not take yet are retried until now.
        await holds.close().catch(() => undefined);
        // Redis not answering: nothing in flight can finish, so the outbox drops its connections.
        const outboxClosed = await delivery.outbox
          .close(!watchdog.up || redis.status !== "ready", outboxEndsMs)
          .catch((err: unknown) => {
            log.warn("webhook outbox did not close cleanly", { error: String(err) });
          });
        if (outboxClosed === false) {
          log.warn("webhook deliveries cut at the shutdown deadline; they are retried after the next start");
          clean = false;
        }
        await Promise.all([
          delivery.sms.close().catch(() => undefined),
          delivery.email.close().catch(() => undefined),
        ]);
        await unwatch();
        await Promise.all(
          [redis, registry.afterAnswer, subscriber].map((r) => r.quit().catch(() => undefined)),
        );
      })();
      if (!(await within(closing, deadlineMs - Date.now()))) {
        log.warn("shutdown grace period over before the outbox, providers and Redis closed");
        clean = false;
        redis.disconnect();
        registry.afterAnswer.disconnect();
        subscriber.disconnect();
      }
      await admin?.close();
      log.info("ringfence stopped", { clean, tookMs: Date.now() - startedMs });
      return clean;
    })());
  return { grpcPort: grpc.port, httpPort, adminPort: admin?.port, registry, stop };
}

/**
 * Pings Redis about every second and says whether it answers (within a second), not merely
 * whether the socket is open: a hung (SIGSTOPped, overloaded) server keeps its socket.
 */
export class RedisWatchdog {
  up = true;
  /** Told of each PING's round trip, in seconds (the Redis latency metric). */
  onPing: ((seconds: number) => void) | undefined;
  private timer: NodeJS.Timeout | undefined;
  private pinging = false;

  constructor(
    private readonly redis: RedisClient,
    private readonly log: Logger,
    private readonly onChange: (up: boolean) => void,
    private readonly everyMs = 1_000,
    private readonly timeoutMs = 1_000,
  ) {}

  start(): void {
    this.timer = setInterval(() => {
      void this.probe();
    }, this.everyMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  async probe(): Promise<void> {
    if (this.pinging) return;
    this.pinging = true;
    try {
      const sent = process.hrtime.bigint();
      const answered = await within(
        this.redis.ping().then(
          () => this.onPing?.(elapsedMs(sent) / 1000),
          () => {
            throw new Error("no answer");
          },
        ),
        this.timeoutMs,
      ).catch(() => false);
      this.report(answered);
    } finally {
      this.pinging = false;
    }
  }

  report(up: boolean): void {
    if (up === this.up) return;
    this.up = up;
    if (up) this.log.info("redis answers again");
    else this.log.warn("redis does not answer: not serving");
    this.onChange(up);
  }
}

/** Resolves true when `p` settles within `ms`, false otherwise. */
async function within(p: Promise<unknown>, ms: number): Promise<boolean> {
  void p.catch(() => undefined);
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => {
    timer = setTimeout(() => {
      resolve(false);
    }, ms);
  });
  const done = await Promise.race([p.then(() => true as const), late]);
  clearTimeout(timer);
  return done;
}
