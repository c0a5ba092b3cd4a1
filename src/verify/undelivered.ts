/**
 * A message reported undelivered or rejected (docs/routing.md#undelivered): refunded once, and the
 * code it carried sent once more through the next available provider of its route while it lives.
 */
import { errorMessage } from "../log.js";
import type { DeliveryState, OutgoingSms } from "../messaging/provider.js";
import type { ParsedNumber } from "../phone/e164.js";
import type { MessageRef } from "./row.js";
import type { VerifyDeps } from "./deps.js";
import { untilDone } from "./holds.js";
import { fallForward } from "./fallback.js";

/** The delivery states a refund follows (an SMPP `UNDELIV` is `failed`). */
export const UNDELIVERED: ReadonlySet<DeliveryState> = new Set(["failed", "expired", "rejected"]);

/**
 * Refunds `owner`'s message reported undelivered by `provider` and, when the script says so, re-sends
 * its code through another provider of the route, charging the price again once one accepts. Never
 * throws for the re-send: a failed one is logged and stays refunded.
 */
export async function afterUndelivered(
  deps: Pick<
    VerifyDeps,
    "store" | "router" | "secrets" | "log" | "fraud" | "config" | "accounts" | "metrics"
  >,
  provider: string,
  owner: MessageRef,
  phone: ParsedNumber,
  now: number,
): Promise<void> {
  const { store, router, log } = deps;
  const priced =
    owner.channel === undefined ? undefined : { channel: owner.channel, price: owner.price ?? 0 };
  const r = await store.undelivered(
    owner.customer,
    owner.auth,
    owner.attempt,
    owner.resend === true,
    now,
    priced,
  );
  if (r.status === "fallback") {
    log.info("undelivered message refunded; the code goes by the next channel", {
      provider,
      attempt: owner.attempt,
      channel: r.channel,
    });
    deps.metrics.channelFallback(owner.channel ?? "sms", r.channel, "undelivered");
    await fallForward(deps, owner, r, now);
    return;
  }
  if (r.status !== "resend") {
    if (r.status === "refunded")
      log.info("undelivered message refunded", { provider, attempt: owner.attempt });
    return;
  }
  let sms: OutgoingSms;
  try {
    sms = JSON.parse(deps.secrets.decrypt(r.sealed)) as OutgoingSms;
  } catch (err) {
    log.error("undelivered message unreadable; refunded, not re-sent", { error: errorMessage(err) });
    return;
  }
  const destination = await deps.fraud.destinationOf(phone);
  const plan = router.plan("sms", destination, provider);
  const resend = { ...sms, reference: `${sms.reference}r` };
  for (const p of plan.providers) {
    if (p.spec.name === router.provider(provider)?.spec.name || !router.take(p)) continue;
    let providerId: string;
    try {
      ({ providerId } = await p.send(resend));
    } catch (err) {
      router.submitted(p, plan, err);
      log.warn("undelivered message not re-sent by this provider", {
        provider: p.spec.name,
        error: errorMessage(err),
      });
      continue;
    }
    router.submitted(p, plan, true);
    // Accepted: charged once (the script notes it), and its id kept for its own reports, however
    // long Redis takes to answer.
    const fields = { reference: resend.reference };
    await Promise.all([
      untilDone(store, log, "re-send charge", fields, () =>
        store.chargeResend(owner.customer, owner.auth, owner.attempt, r.price, now),
      ),
      untilDone(store, log, "message id", fields, () =>
        store.rememberMessage(
          p.spec.name,
          providerId,
          { ...owner, route: plan.route, resend: true },
          deps.config.SMS_RECEIPT_RETENTION_SECONDS,
        ),
      ),
    ]);
    log.info("undelivered message re-sent", { from: provider, to: p.spec.name, attempt: owner.attempt });
    return;
  }
  log.warn("undelivered message not re-sent: no other provider took it", {
    provider,
    attempt: owner.attempt,
  });
}
