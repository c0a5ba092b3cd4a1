import type { Server as HttpServer } from "node:http";
import type { AddressInfo } from "node:net";
import { DEV_ONLY, type Config } from "./config.js";
import type { Logger } from "./log.js";
import { Secrets } from "./crypto/secrets.js";
import { connectRedis, createRedis, Keys, type RedisClient } from "./redis/client.js";
import { RedisAccountStore } from "./accounts/store.js";
import { RedisLookupData } from "./lookup/lookup-data.js";
import { lookupHandlers } from "./lookup/service.js";
import { preloadNumberData } from "./lookup/numbers.js";
import { LookupServiceService } from "./gen/ringfence/lookup/v1/lookup_service.js";
import { bindService, type ServiceBinding } from "./rpc/binding.js";
import { loadContract } from "./rpc/contract.js";
import { startGrpc } from "./grpc/server.js";
import { createGateway } from "./gateway/gateway.js";
import { v1ServiceOptions } from "./v1/deprecation.js";
import { VerifyServiceService } from "./gen/ringfence/verify/v1/verify_service.js";
import { VerifyStore } from "./verify/store.js";
import { recordReceipt, verifyHandlers, type VerifyDeps } from "./verify/service.js";
import { createSmsProvider, type SmsProvider } from "./messaging/sms.js";
import { WebhookOutbox } from "./webhooks/outbox.js";
import { HoldRecovery } from "./verify/holds.js";
import { createBlockingRedis } from "./redis/client.js";
import { AppStore } from "./apps/store.js";
import { ClientStore } from "./oauth/clients.js";
import { RedisSigningKeys } from "./oauth/keys/signing-keys.js";
import { CachedKeySet } from "./oauth/keys/key-set.js";
import { oauthHandlers } from "./oauth/service.js";
import { OAuthServiceService } from "./gen/ringfence/oauth/v1/oauth_service.js";
import { SessionServiceService } from "./gen/ringfence/session/v1/session_service.js";
import { StepUpServiceService } from "./gen/ringfence/stepup/v1/stepup_service.js";
import { AppWebhooks, appWebhookSecret, createAppWebhookHandler, isAppWebhookRef } from "./apps/webhooks.js";
import { createEmailProvider, type EmailProvider } from "./messaging/email.js";
import { UserStore } from "./session/users.js";
import { SessionStore } from "./session/sessions.js";
import { ChallengeStore } from "./session/challenges.js";
import { CodeSender } from "./session/delivery.js";
import { sessionHandlers } from "./session/service.js";
import { stepUpHandlers } from "./stepup/service.js";
import { DelegationClient } from "./stepup/delegation.js";

/** Everything the domains need, built once from the validated config. */
export interface Registry {
  config: Config;
  log: Logger;
  redis: RedisClient;
  keys: Keys;
  secrets: Secrets;
  accounts: RedisAccountStore;
  lookupData: RedisLookupData;
  verify: VerifyStore;
  apps: AppStore;
  clients: ClientStore;
  signingKeys: RedisSigningKeys;
  users: UserStore;
  sessions: SessionStore;
  challenges: ChallengeStore;
}

export async function openRegistry(config: Config, log: Logger): Promise<Registry> {
  const redis = createRedis(config);
  redis.on("error", (err: Error) => {
    log.warn("redis error", { error: err.message });
  });
  await connectRedis(redis);
  const keys = new Keys(config.REDIS_KEY_PREFIX);
  const secrets = new Secrets(config.SECRETS_KEY);
  return {
    config,
    log,
    redis,
    keys,
    secrets,
    accounts: new RedisAccountStore(redis, keys, secrets),
    lookupData: new RedisLookupData(redis, keys),
    verify: new VerifyStore(redis, keys),
    apps: new AppStore(redis, keys, secrets),
    clients: new ClientStore(redis, keys, secrets),
    signingKeys: new RedisSigningKeys(redis, keys, secrets, {
      tokenLifetimeSeconds: Math.max(config.ACCESS_TOKEN_TTL_SECONDS, config.SESSION_TOKEN_TTL_SECONDS),
    }),
    users: new UserStore(redis, keys),
    sessions: new SessionStore(redis, keys, config.REFRESH_TOKEN_TTL_SECONDS * 1000),
    challenges: new ChallengeStore(redis, keys),
  };
}

/** The secret that signs a webhook stream, from its `secret_ref` (`account:<customer_uuid>`). */
async function webhookSecret(r: Registry, ref: string): Promise<string | undefined> {
  if (isAppWebhookRef(ref)) return appWebhookSecret(r.redis, r.keys, r.secrets, ref);
  const [kind, id] = ref.split(":", 2);
  if (kind !== "account" || id === undefined) return undefined;
  const account = await r.accounts.get(id);
  return account === undefined ? undefined : r.secrets.decrypt(account.webhookSecretSealed);
}

/** The parts that talk to the outside and run in the background: not built for one CLI command. */
export interface Delivery {
  sms: SmsProvider;
  email: EmailProvider;
  outbox: WebhookOutbox;
}

export function openDelivery(r: Registry): Delivery {
  const { config, log } = r;
  return {
    sms: createSmsProvider(config, log),
    email: createEmailProvider(config, log),
    outbox: new WebhookOutbox({
      redis: r.redis,
      connection: () => createBlockingRedis(config),
      keys: r.keys,
      queuePrefix: `{${config.REDIS_KEY_PREFIX}bull}`,
      resolveSecret: (ref) => webhookSecret(r, ref),
      log,
      timeoutMs: config.WEBHOOK_TIMEOUT_MS,
      concurrency: config.WEBHOOK_CONCURRENCY,
      sweepIntervalMs: config.WEBHOOK_SWEEP_INTERVAL_MS,
      backoff: {
        baseMs: config.WEBHOOK_BACKOFF_BASE_MS,
        maxDelayMs: config.WEBHOOK_BACKOFF_MAX_MS,
        giveUpAfterMs: config.WEBHOOK_GIVE_UP_MS,
      },
    }),
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
  };
  d.sms.onReceipt((receipt) => {
    recordReceipt(verify, receipt).catch((err: unknown) => {
      r.log.error("delivery receipt not recorded", {
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
  });
  const keySet = new CachedKeySet(r.signingKeys);
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
  return [
    bindService(VerifyServiceService, verifyHandlers(verify), v1ServiceOptions(r.config, "verify")),
    bindService(
      SessionServiceService,
      sessionHandlers({ ...session, signingKeys: r.signingKeys }, createAppWebhookHandler(r.apps, events)),
      { dialect: "session" },
    ),
    bindService(
      StepUpServiceService,
      stepUpHandlers({
        ...session,
        keys: r.keys,
        delegation: new DelegationClient({ keys: r.signingKeys, logger: r.log }),
      }),
      { dialect: "session" },
    ),
    bindService(
      OAuthServiceService,
      oauthHandlers({
        apps: r.apps,
        clients: r.clients,
        keys: r.signingKeys,
        issuer: r.config.ISSUER_URL,
        lifetimeSeconds: r.config.ACCESS_TOKEN_TTL_SECONDS,
        events,
      }),
      { dialect: "session", methodDialects: { createToken: "oauth" } },
    ),
    bindService(
      LookupServiceService,
      lookupHandlers({ accounts: r.accounts, secrets: r.secrets, data: r.lookupData }),
      v1ServiceOptions(r.config, "lookup"),
    ),
  ];
}

export interface RunningApp {
  grpcPort: number;
  /** undefined when HTTP_PORT=0 (Envoy in front instead). */
  httpPort: number | undefined;
  registry: Registry;
  /** Stops taking calls, lets in-flight ones finish (up to SHUTDOWN_GRACE_MS), then closes Redis. */
  stop(): Promise<void>;
}

export async function startApp(config: Config, log: Logger): Promise<RunningApp> {
  for (const name of config.devDefaults) {
    log.warn(`${name}: ${DEV_ONLY[name] ?? "development default"}. Never run like this in production.`);
  }
  const registry = await openRegistry(config, log);
  // Build the static number indexes now rather than on the first caller's lookup.
  await preloadNumberData();
  // The first signing key exists before the first token; a wrong SECRETS_KEY fails here, not per call.
  await registry.signingKeys.current();
  const delivery = openDelivery(registry);
  await delivery.outbox.start();
  // Charged V1 messages whose provider answer was never recorded (a crash, a timeout).
  const holds = new HoldRecovery({
    config,
    store: registry.verify,
    sms: delivery.sms,
    secrets: registry.secrets,
    log,
  });
  holds.start();
  const bindings = services(registry, delivery);
  const contract = loadContract();
  const deps = { log, docsUrl: config.DOCS_URL };
  const grpc = await startGrpc(
    bindings,
    { host: config.HOST, port: config.GRPC_PORT },
    { ...deps, descriptor: contract.bytes },
  );

  const { redis } = registry;
  const ready = async () => {
    if (redis.status !== "ready") return false;
    await redis.ping();
    return true;
  };
  grpc.setServing("SERVING");
  redis.on("ready", () => {
    grpc.setServing("SERVING");
  });
  redis.on("close", () => {
    grpc.setServing("NOT_SERVING");
  });

  let http: HttpServer | undefined;
  if (config.HTTP_PORT !== 0) {
    http = createGateway(bindings, { ...deps, maxBodyBytes: config.MAX_BODY_BYTES, contract, ready });
    const server = http;
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(config.HTTP_PORT, config.HOST, () => {
        resolve();
      });
    });
  }
  const httpPort = http === undefined ? undefined : (http.address() as AddressInfo).port;
  log.info("ringfence started", { grpcPort: grpc.port, httpPort, host: config.HOST });

  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      grpc.setServing("NOT_SERVING");
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
      let timer: NodeJS.Timeout | undefined;
      const deadline = new Promise<"late">((resolve) => {
        timer = setTimeout(() => {
          resolve("late");
        }, config.SHUTDOWN_GRACE_MS);
      });
      if ((await Promise.race([drained, deadline])) === "late") {
        log.warn("shutdown grace period over: closing remaining calls");
        grpc.server.forceShutdown();
        http?.closeAllConnections();
      }
      clearTimeout(timer);
      // With Redis gone the queue cannot close cleanly; what it had stays in Redis for the next start.
      const closed = await within(delivery.outbox.close(), 3_000).catch((err: unknown) => {
        log.warn("webhook outbox did not close cleanly", { error: String(err) });
        return true;
      });
      if (!closed) log.warn("webhook outbox close timed out");
      await within(holds.close(), 3_000).catch(() => undefined);
      await delivery.sms.close().catch(() => undefined);
      await delivery.email.close().catch(() => undefined);
      await redis.quit().catch(() => undefined);
      log.info("ringfence stopped");
    })());
  return { grpcPort: grpc.port, httpPort, registry, stop };
}

/** Resolves true when `p` settles within `ms`, false otherwise. */
async function within(p: Promise<unknown>, ms: number): Promise<boolean> {
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
