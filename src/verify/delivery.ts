/**
 * What follows a charge: the held message handed to the provider, then its hold settled, its
 * message id kept for receipts and its `sent` event recorded; and the start of webhook delivery
 * of an authentication's events.
 */
import { RingfenceError } from "../errors.js";
import { errorMessage, type Logger } from "../log.js";
import type { CallScope } from "../observability/calls.js";
import type { OutgoingSms } from "../messaging/provider.js";
import type { Envelope } from "./model.js";
import type { Hold } from "./store.js";
import type { VerifyDeps } from "./deps.js";
import { outcomeUnknown, settleHold, unavailable } from "./holds.js";
import { compactEvent, type EventContext } from "./row.js";

/**
 * Sends one held message. Accepted: the hold is committed (the charge stands; in the
 * background if Redis does not answer), the message id remembered for delivery receipts and
 * the `sent` event recorded, all three in one round trip, and the call succeeds. Refused: the
 * hold is released (refund, windows freed) and the call fails. No answer: the hold stays for
 * the recovery, which re-sends with the same reference and charges by the answer; the caller
 * gets 503. Answers whether the event awaits webhook delivery.
 */
export async function deliver(
  deps: Pick<VerifyDeps, "store" | "sms" | "config">,
  hold: Hold,
  sms: OutgoingSms,
  attempt: number,
  sent: Envelope,
  ctx: EventContext,
  call: CallScope,
): Promise<boolean> {
  const { store } = deps;
  const { log } = call;
  let providerId: string;
  try {
    ({ providerId } = await deps.sms.send(sms, call));
  } catch (err) {
    const error = errorMessage(err);
    if (outcomeUnknown(err)) {
      log.warn("sms outcome unknown; held for recovery", { reference: sms.reference, error });
      throw unavailable("the provider did not answer; the message is charged only if it was accepted");
    }
    await settleHold(store, log, hold, "release");
    log.error("sms not accepted", { provider: deps.sms.name, reference: sms.reference, error });
    if (err instanceof RingfenceError) throw err;
    throw new RingfenceError("internal_server_error", "the message could not be sent; nothing was charged");
  }
  const auth = hold.id.split(".")[0] ?? "";
  const [, , hooked] = await Promise.all([
    settleHold(store, log, hold, "commit"),
    store
      .rememberMessage(
        deps.sms.name,
        providerId,
        { customer: hold.customer, auth, attempt },
        deps.config.SMS_RECEIPT_RETENTION_SECONDS,
      )
      .catch((err: unknown) => {
        log.warn("message id not remembered", { error: String(err) });
      }),
    afterSent(deps, hold.customer, auth, sent, compactEvent(sent, ctx), log),
  ]);
  return hooked;
}

/** Records an event after the message went out; a failure must not fail the call. */
async function afterSent(
  deps: Pick<VerifyDeps, "store">,
  customerUuid: string,
  authUuid: string,
  event: Envelope,
  compact: string,
  log: Logger,
): Promise<boolean> {
  try {
    return (await deps.store.appendEvent(customerUuid, authUuid, event, compact)).hooked;
  } catch (err) {
    log.warn("attempt event not recorded", {
      error: errorMessage(err),
    });
    return false;
  }
}

/**
 * Starts delivery of an authentication's webhook events. A failure here must not fail the call:
 * the events are recorded, and the outbox's recovery sweep delivers them later.
 */
export async function kick(deps: Pick<VerifyDeps, "webhooks">, list: string, log: Logger): Promise<void> {
  try {
    await deps.webhooks.kick(list);
  } catch (err) {
    log.warn("webhook delivery not started; the sweep will", {
      error: errorMessage(err),
    });
  }
}
