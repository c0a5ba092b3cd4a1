/**
 * What follows a charge: the held message handed to the providers its route names, failing over
 * within the call, then its hold settled, its message id kept for receipts and its `sent` event
 * recorded; and the start of webhook delivery of an authentication's events.
 */
import { RingfenceError } from "../errors.js";
import { errorMessage, type Logger } from "../log.js";
import type { CallScope } from "../observability/calls.js";
import type { DeliveryProvider } from "../messaging/providers.js";
import type { Envelope } from "./model.js";
import type { Hold, HoldArgs } from "./store.js";
import type { VerifyDeps } from "./deps.js";
import { holdSpanMs, outcomeUnknown, settleHold, unavailable, untilDone } from "./holds.js";
import { compactEvent, type EventContext } from "./row.js";
import type { Stage } from "./channels.js";
import { scheduleSilence } from "./fallback.js";

/** A charged message and the plan of providers it goes through. */
export interface Charged {
  hold: Hold;
  /** What the charging script recorded of the hold (its deadline, its first provider). */
  held: HoldArgs;
  /**
   * Its channel first (the message, providers and price it was charged for), then those it falls
   * back through, in order, when every provider of one refuses it (docs/v2-api.md#fallback).
   */
  stages: readonly [Stage, ...Stage[]];
}

/**
 * Sends one held message through its plan: each provider in turn until one accepts (docs/routing.md#availability).
 * Accepted: the hold is committed (the charge stands; in the background if Redis does not answer),
 * the message id remembered for delivery receipts and the `sent` event recorded, all three in one
 * round trip, and the call succeeds. Refused by every provider: the hold is released (refund,
 * windows freed) and the call fails. The last provider tried did not answer: the hold stays for the
 * recovery, which re-sends through that provider with the same reference and charges by the answer;
 * the caller gets 503. Answers whether the event awaits webhook delivery.
 */
export async function deliver(
  deps: Pick<VerifyDeps, "store" | "router" | "config" | "secrets" | "metrics">,
  charged: Charged,
  attempt: number,
  sent: (stage: Pick<Stage, "channel" | "price">) => Envelope,
  ctx: EventContext,
  call: CallScope,
): Promise<{ hooked: boolean; stage: Stage }> {
  const { store } = deps;
  const { hold } = charged;
  const { log } = call;
  const carried = await submit(deps, charged, call);
  if (carried === undefined) {
    await settleHold(store, log, hold, "release");
    throw new RingfenceError("internal_server_error", "the message could not be sent; nothing was charged");
  }
  const { provider, providerId, stage } = carried;
  const auth = hold.id.split(".")[0] ?? "";
  const event = sent(stage);
  // A message of a verification with several channels names its own and its price: a report of
  // it undelivered refunds that price (docs/v2-api.md#fallback).
  const priced = charged.stages.length === 1 ? {} : { channel: stage.channel, price: stage.price };
  const [, , hooked] = await Promise.all([
    settleHold(store, log, hold, "commit"),
    // Its receipts find it by this id: a report of it undelivered is refunded (docs/routing.md#undelivered).
    untilDone(store, log, "message id", { reference: stage.sms.reference }, () =>
      store.rememberMessage(
        provider.spec.name,
        providerId,
        { customer: hold.customer, auth, attempt, route: stage.plan.route, ...priced },
        deps.config.SMS_RECEIPT_RETENTION_SECONDS,
      ),
    ),
    afterSent(deps, hold.customer, auth, event, compactEvent(event, ctx), log),
    // On WhatsApp, a message not reported delivered in time falls back to the next channel.
    scheduleSilence(
      { store, config: deps.config, log },
      { customer: hold.customer, auth, attempt, channel: stage.channel },
      charged.stages.map((s) => s.channel),
      Date.now(),
    ),
  ]);
  return { hooked, stage };
}

/**
 * Tries the plan's providers in order, each one available now, moving the hold to each after the
 * first; then, when every one refused, the next channels' (the hold moved with its new message and
 * price, the difference charged or refunded). Answers the provider that accepted and its stage, or
 * undefined when none did. Throws (the hold settled as it must be) when the call may not go on: its
 * deadline passed or the service is stopping (hold released), a recovery took the hold, or the last
 * provider tried did not answer (hold kept).
 */
async function submit(
  deps: Pick<VerifyDeps, "store" | "router" | "config" | "secrets" | "metrics">,
  { hold, held, stages }: Charged,
  call: CallScope,
): Promise<{ provider: DeliveryProvider; providerId: string; stage: Stage } | undefined> {
  const { store, router } = deps;
  const { log } = call;
  const [first] = stages;
  const { sms, plan } = first;
  // A hold of the only provider names none (holds.ts, holdArgs).
  let holder = held.provider === "" ? plan.providers[0]?.spec.name : held.provider;
  let deadline = held.deadline;
  let unknown = false;
  let carrying = first;
  for (const stage of stages) {
    for (const provider of stage.plan.providers) {
      const name = provider.spec.name;
      if (!router.take(provider)) continue;
      if (name !== holder || stage !== carrying) {
        const until = Date.now() + holdSpanMs(deps.config, provider);
        const change =
          stage === carrying
            ? undefined
            : {
                channel: stage.channel,
                price: stage.price,
                sealed: deps.secrets.encrypt(JSON.stringify(stage.sms)),
              };
        // Not moved (a recovery has it, or Redis did not answer): the hold is left to the recovery.
        const moved = await store
          .moveHold(hold, deadline, until, name, stage.plan.route, change)
          .catch(() => "left" as const);
        if (moved === "poor") {
          // The balance does not cover this channel's price: its other providers would not either.
          router.release(provider);
          log.warn("fallback channel not affordable", { channel: stage.channel, reference: sms.reference });
          break;
        }
        if (moved !== "moved") {
          router.release(provider);
          throw unavailable("the message is being recovered; it is charged only if it was accepted");
        }
        log.info("message moved to the next provider", { from: holder, to: name, reference: sms.reference });
        if (stage !== carrying) deps.metrics.channelFallback(carrying.channel, stage.channel, "refused");
        holder = name;
        deadline = until;
        carrying = stage;
      }
      try {
        const { providerId } = await provider.send(stage.sms, call);
        router.submitted(provider, stage.plan, true);
        return { provider, providerId, stage };
      } catch (err) {
        if (err instanceof RingfenceError) {
          // Nothing went out: the caller stopped waiting, or the service is stopping.
          router.release(provider);
          await settleHold(store, log, hold, "release");
          throw err;
        }
        router.submitted(provider, stage.plan, err);
        unknown = outcomeUnknown(err);
        log.warn(unknown ? "sms outcome unknown" : "sms not accepted", {
          provider: name,
          reference: sms.reference,
          error: errorMessage(err),
        });
      }
    }
  }
  if (unknown && router.providers.length < 2) {
    // The only provider may have taken it: the recovery asks it again, as it did before routes.
    throw unavailable("the provider did not answer; the message is charged only if it was accepted");
  }
  // With several providers a submit that timed out is given up, the last one too: the hold is
  // released and nothing is charged (docs/routing.md#availability).
  log.error("sms not accepted by any provider", { route: plan.route, reference: sms.reference });
  return undefined;
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
