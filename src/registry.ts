import type { Config } from "./config.js";
import type { Logger } from "./log.js";
import { Secrets } from "./crypto/secrets.js";
import { checkSecretsKey } from "./crypto/key-check.js";
import { connectRedis, createRedis, Keys, reportRedisErrors, type RedisClient } from "./redis/client.js";
import { RedisAccountStore } from "./accounts/store.js";
import { AccountCache } from "./accounts/cache.js";
import { RedisLookupData } from "./lookup/lookup-data.js";
import { VerifyStore } from "./verify/store.js";
import { FraudEngine } from "./fraud/engine.js";
import { AppStore } from "./apps/store.js";
import { ClientStore } from "./oauth/clients.js";
import { RedisSigningKeys } from "./oauth/keys/signing-keys.js";
import { UserStore } from "./session/users.js";
import { SessionStore } from "./session/sessions.js";
import { ChallengeStore } from "./session/challenges.js";
import { OutboundGuard } from "./net/outbound.js";
import { Metrics } from "./observability/metrics.js";

/**
 * The connections and stores every domain shares, built once from the validated config: what the
 * service and the CLI alike open (the modules of src/app.ts add what only the service runs).
 */
export interface Registry {
  config: Config;
  log: Logger;
  redis: RedisClient;
  keys: Keys;
  secrets: Secrets;
  accounts: RedisAccountStore;
  /** The accounts V1 callers authenticate with, kept in the process (see AccountCache). */
  accountCache: AccountCache;
  lookupData: RedisLookupData;
  verify: VerifyStore;
  /** The fraud engine every code-carrying send goes through (docs/fraud.md). */
  fraud: FraudEngine;
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
    throw err;
  }
  return {
    config,
    log,
    redis,
    keys,
    secrets,
    accounts,
    accountCache: new AccountCache(accounts, secrets),
    lookupData: new RedisLookupData(redis, keys),
    verify: new VerifyStore(redis, keys),
    fraud: new FraudEngine({ redis, keys, config, secrets, metrics, log }),
    apps: new AppStore(redis, keys, secrets),
    clients: new ClientStore(redis, keys, secrets),
    signingKeys,
    users: new UserStore(redis, keys),
    sessions: new SessionStore(
      redis,
      keys,
      config.REFRESH_TOKEN_TTL_SECONDS * 1000,
      config.REFRESH_REUSE_GRACE_SECONDS * 1000,
    ),
    challenges: new ChallengeStore(redis, keys),
    outbound: new OutboundGuard(config.OUTBOUND_ALLOWED_CIDRS),
    metrics,
  };
}
