import type { Secrets } from "../crypto/secrets.js";
import type { Logger } from "../log.js";
import type { OutboundGuard } from "../net/outbound.js";
import type { Metrics } from "../observability/metrics.js";
import type { Keys, RedisClient } from "../redis/client.js";
import type { ServiceBinding } from "../rpc/binding.js";

/**
 * The process's shared connections and services (src/registry.ts builds them with every domain's
 * stores): a module names the ones it takes, beside its own settings and stores, rather than the
 * whole registry.
 */
export interface SharedParts {
  log: Logger;
  redis: RedisClient;
  keys: Keys;
  secrets: Secrets;
  /** Calls to caller-supplied URLs: checked at registration and at connect time. */
  outbound: OutboundGuard;
  metrics: Metrics;
}

/**
 * What a domain brings to the running service (connect-es `router.service`, Hydra's registry):
 * its service bindings, the caches it keeps in the process, what must hold before the first call,
 * and its background work. `src/app.ts` lists the modules; `lifecycle.ts` starts and stops them.
 */
export interface Module {
  readonly name: string;
  /** The services it serves, each bound with its handler sets and caller chains. */
  readonly bindings?: readonly ServiceBinding[];
  /** Done once before the first call, in the order the modules are listed. */
  readonly prepare?: () => Promise<void>;
  /**
   * What the process keeps of Redis and drops when another instance or the CLI announces a
   * change (src/redis/watched-cache.ts): each watches on the process's subscriber connection.
   */
  readonly watched?: readonly Watched[];
  /** Background work: started in the order listed, closed at shutdown in the reverse order. */
  readonly background?: readonly Background[];
}

export interface Watched {
  watch(subscriber: RedisClient): Promise<() => Promise<void>>;
}

export interface Background {
  /**
   * Whether only one process of an instance runs it (a scan or a sweep; StartOptions.singletonDuties);
   * the others are started in every process.
   */
  readonly singleton?: boolean;
  start?(): void | Promise<void>;
  /** Resolves once the one-off pass `start` began (a scan completing an index) has ended. */
  settled?(): Promise<unknown>;
  /** Shutdown began: the calls in flight are cut at `drainEndsMs` (epoch ms). */
  shutdownBegins?(drainEndsMs: number): void;
  /**
   * Ends it once the calls in flight are drained, before Redis closes. `redisAnswers` false: what
   * waits on Redis cannot finish. Resolves false when something had to be cut by `deadlineMs`.
   */
  close?(ending: { deadlineMs: number; redisAnswers: boolean }): Promise<unknown>;
}
