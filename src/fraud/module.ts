import { randomUUID } from "node:crypto";
import { accountOf } from "../accounts/authenticate.js";
import type { AccountsModule } from "../accounts/module.js";
import { badField, refusedBy } from "../errors.js";
import { FraudServiceService } from "../gen/ringfence/verify/v2/fraud_service.js";
import type { Module, SharedParts } from "../lifecycle/module.js";
import { takeWindows, tooManyAttempts, type WindowRule } from "../otp/code.js";
import { WindowKeys } from "../otp/keys.js";
import type { Keys, RedisClient } from "../redis/client.js";
import { bindService, type Handlers } from "../rpc/binding.js";
import type { FraudEngine } from "./engine.js";
import { FraudInsights } from "./insights.js";
import { AccountLanes } from "./lanes.js";
import { FraudInputError } from "./policy.js";
import type { FraudConfig } from "./settings.js";
import { FRAUD_V2 } from "./surface.js";

/** The setting that limits an account's reads of its reports, named in refusals. */
export const REPORTS_LIMIT_SETTING = "REPORTS_LIMIT_ACCOUNT";

/**
 * The most report calls of one account running or waiting on one instance (AccountLanes): more
 * than the default window lets through, so that only an account with the limit raised or off
 * meets it.
 */
const READS_AT_ONCE = 64;

/** The most refused accounts one process remembers (reportReads); past it the oldest is forgotten. */
const REFUSALS_REMEMBERED = 10_000;

/**
 * One more read of an account's reports (REPORTS_LIMIT_ACCOUNT, docs/fraud.md#pages): a sliding
 * window per account over both reports, so that no account reads more than its share however
 * many calls it makes at once; past it 429 with `Retry-After`. A refused account is refused again
 * from memory until its `Retry-After` has passed: the window cannot open earlier (other instances
 * only add to it), and an account that keeps calling once refused then costs no Redis work, so
 * its calls do not slow its neighbours' (docs/fraud.md#pages).
 */
export function reportReads(deps: {
  redis: RedisClient;
  keys: Keys;
  rule: WindowRule;
  now?: () => number;
}): (customer: string) => Promise<void> {
  const rl = new WindowKeys(deps.keys);
  const now = deps.now ?? Date.now;
  /** Refused accounts and when their window opens again (epoch ms), oldest refusal first. */
  const refusedUntil = new Map<string, number>();
  const refuse = (waitMs: number) =>
    refusedBy(
      REPORTS_LIMIT_SETTING,
      tooManyAttempts("too many reads of this account's reports: try again later", waitMs),
    );
  return async (customer) => {
    const until = refusedUntil.get(customer);
    if (until !== undefined) {
      const waitMs = until - now();
      if (waitMs > 0) throw refuse(waitMs);
      refusedUntil.delete(customer);
    }
    const { waitMs } = await takeWindows(
      deps.redis,
      [{ key: rl.reports(customer), rule: deps.rule, name: REPORTS_LIMIT_SETTING }],
      randomUUID(),
    );
    if (waitMs === 0) return;
    if (refusedUntil.size >= REFUSALS_REMEMBERED) {
      const oldest = refusedUntil.keys().next();
      if (oldest.done !== true) refusedUntil.delete(oldest.value);
    }
    refusedUntil.set(customer, now() + waitMs);
    throw refuse(waitMs);
  };
}

/** A refused query parameter as the V2 body names it: 400 `invalid_request` with `param`. */
async function v2Input<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (err instanceof FraudInputError) throw badField(err.field, err.detail);
    throw err;
  }
}

/** GET /v2/insights/verifications and GET /v2/fraud/decisions: the calling account's traffic (docs/fraud.md#insights). */
export function fraudHandlers(
  insights: FraudInsights,
  allowRead: (customer: string) => Promise<void>,
): Handlers<typeof FraudServiceService> {
  const lanes = new AccountLanes(READS_AT_ONCE, REPORTS_LIMIT_SETTING);
  return {
    listVerificationInsights: async (req, ctx) => {
      const tenant = accountOf(ctx).customerUuid;
      await allowRead(tenant);
      return lanes.run(tenant, () =>
        v2Input(() =>
          insights.verifications(tenant, {
            since: req.since,
            until: req.until,
            groupBy: req.groupBy,
            limit: req.limit,
            pageToken: req.pageToken,
          }),
        ),
      );
    },
    listFraudDecisions: async (req, ctx) => {
      const tenant = accountOf(ctx).customerUuid;
      await allowRead(tenant);
      return lanes.run(tenant, () =>
        v2Input(() =>
          insights.decisions(tenant, { since: req.since, limit: req.limit, pageToken: req.pageToken }),
        ),
      );
    },
  };
}

/**
 * What the fraud engine did, read by the customer: insights per destination and the decision
 * records, authenticated with the account's API key as a V2 bearer, a page a call and a limited
 * number of calls per account. The engine itself runs inside the send scripts (src/verify,
 * src/session); its policy is set with `ringfence fraud`.
 */
/** What the fraud module takes of the process (src/registry.ts gives it). */
export interface FraudNeeds extends Pick<SharedParts, "redis" | "keys" | "secrets"> {
  config: Pick<FraudConfig, "REPORTS_LIMIT_ACCOUNT">;
  fraud: FraudEngine;
}

export function fraudModule(r: FraudNeeds, accounts: AccountsModule): Module {
  const insights = new FraudInsights(r.redis, r.fraud.keys, r.fraud.rules, r.secrets);
  const allowRead = reportReads({ redis: r.redis, keys: r.keys, rule: r.config.REPORTS_LIMIT_ACCOUNT });
  return {
    name: "fraud",
    bindings: [
      bindService(FRAUD_V2.definition, fraudHandlers(insights, allowRead), {
        ...FRAUD_V2.surface,
        authenticators: { account: accounts.bearer },
      }),
    ],
  };
}
