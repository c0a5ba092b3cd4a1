import { accountOf } from "../accounts/authenticate.js";
import type { AccountsModule } from "../accounts/module.js";
import { badField } from "../errors.js";
import { FraudServiceService } from "../gen/ringfence/verify/v2/fraud_service.js";
import type { Module } from "../lifecycle/module.js";
import type { Registry } from "../registry.js";
import { bindService, type Handlers } from "../rpc/binding.js";
import { CALLERS } from "../rpc/surface.js";
import { FraudInsights } from "./insights.js";
import { FraudInputError } from "./policy.js";

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
export function fraudHandlers(insights: FraudInsights): Handlers<typeof FraudServiceService> {
  return {
    listVerificationInsights: (req, ctx) =>
      v2Input(() =>
        insights.verifications(accountOf(ctx).customerUuid, {
          since: req.since,
          until: req.until,
          groupBy: req.groupBy,
        }),
      ),
    listFraudDecisions: (req, ctx) =>
      v2Input(() => insights.decisions(accountOf(ctx).customerUuid, { since: req.since, limit: req.limit })),
  };
}

/**
 * What the fraud engine did, read by the customer: insights per destination and the decision
 * records, authenticated with the account's API key as a V2 bearer. The engine itself runs inside
 * the send scripts (src/verify, src/session); its policy is set with `ringfence fraud`.
 */
export function fraudModule(r: Registry, accounts: AccountsModule): Module {
  const insights = new FraudInsights(r.redis, r.fraud.keys, r.fraud.rules);
  return {
    name: "fraud",
    bindings: [
      bindService(FraudServiceService, fraudHandlers(insights), {
        dialect: "v2",
        callers: CALLERS["ringfence.verify.v2.FraudService"],
        authenticators: { account: accounts.bearer },
      }),
    ],
  };
}
