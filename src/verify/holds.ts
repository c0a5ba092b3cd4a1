import { RingfenceError } from "../errors.js";
import { errorMessage, type Logger } from "../log.js";
import type { Secrets } from "../crypto/secrets.js";
import { COMMAND_TIMEOUT_MS } from "../redis/client.js";
import { DeliveryError, type OutgoingSms } from "../messaging/provider.js";
import type { SmsProvider } from "../messaging/sms.js";
import type { CallScope } from "../observability/calls.js";
import type { Plan, Router } from "../delivery/router.js";
import type { VerifyConfig } from "./deps.js";
import type { Hold, HoldArgs, VerifyStore } from "./store.js";

/** What holds read of the settings (the provider says its longest send itself). */
export type HoldSettings = Pick<
  VerifyConfig,
  "SMS_HOLD_MARGIN_MS" | "SMS_HOLD_RECOVERY_INTERVAL_MS" | "SMS_RECEIPT_RETENTION_SECONDS"
>;

/**
 * A charging script refuses to act this long after it was issued: the caller's command times
 * out at COMMAND_TIMEOUT_MS, and the margin leaves time for an answer to travel back.
 */
export const STALE_AFTER_MS = COMMAND_TIMEOUT_MS - 250;

/** How long the owner of a hold may still be sending its message: past that, recovery takes it. */
export function holdSpanMs(config: HoldSettings, sms: Pick<SmsProvider, "longestSendMs">): number {
  return STALE_AFTER_MS + sms.longestSendMs + config.SMS_HOLD_MARGIN_MS;
}

/**
 * True when a provider failure leaves unknown whether the message was accepted: no answer in
 * time, or the link lost after the message went out. Any other failure is a refusal.
 */
export function outcomeUnknown(err: unknown): boolean {
  return err instanceof DeliveryError && err.outcomeUnknown;
}

/** The 503 of a send whose charge was not made (stale) or whose outcome is not known yet. */
export function unavailable(message: string): RingfenceError {
  return new RingfenceError("unavailable", message, { "retry-after": "5" });
}

const RETRY_MIN_MS = 500;
const RETRY_MAX_MS = 30_000;

/**
 * Commits or releases a hold now; when Redis does not answer, keeps trying in the background
 * (doubling the wait up to 30 s) until it lands or the connection is closed for good (then the
 * recovery of the next start resolves it). With `unclaimed`, see VerifyStore.resolveHold. Never
 * throws.
 */
export async function settleHold(
  store: VerifyStore,
  log: Logger,
  hold: Hold,
  outcome: "commit" | "release",
  unclaimed?: Pick<HoldArgs, "sealed" | "deadline">,
): Promise<void> {
  await untilDone(store, log, "hold", { hold: hold.id, outcome }, async () => {
    await store.resolveHold(hold, outcome, unclaimed);
  });
}

/**
 * Runs `write` now; when Redis does not answer, keeps trying in the background (doubling the wait
 * up to 30 s) until it lands or the connection is closed for good. `write` must be idempotent.
 * Never throws.
 */
export async function untilDone(
  store: Pick<VerifyStore, "closed">,
  log: Logger,
  what: string,
  fields: Record<string, unknown>,
  write: () => Promise<void>,
): Promise<void> {
  const attempt = async (delay: number): Promise<void> => {
    try {
      await write();
    } catch (err) {
      if (store.closed()) {
        log.warn(`${what} not written; Redis is closed`, fields);
        return;
      }
      log.warn(`${what} not written yet; retrying`, { ...fields, error: errorMessage(err) });
      setTimeout(() => void attempt(Math.min(delay * 2, RETRY_MAX_MS)), delay).unref();
    }
  };
  await attempt(RETRY_MIN_MS);
}

/**
 * What a failed charging script (send or retry) leaves: a refusal charged nothing; any other
 * failure may be a script Redis ran all the same, its answer lost or late (a paused, slow or
 * restarting Redis), so a charge for a message nobody sends now, as the caller gets 503. That
 * hold is released (refund, windows freed, authentication removed or previous code restored)
 * in the background once Redis answers, unless a recovery claimed it first. Rethrows.
 */
export function giveBack(
  store: VerifyStore,
  hold: Hold,
  held: HoldArgs,
  call: CallScope,
): (err: unknown) => never {
  return (err) => {
    if (!(err instanceof RingfenceError)) {
      void settleHold(store, call.log, hold, "release", held);
    }
    throw err;
  };
}

/**
 * The hold arguments of a send or retry issued now, its message sealed (it holds the code), naming
 * the first provider of `plan` available now (the one its message goes to first).
 */
export function holdArgs(
  deps: { config: HoldSettings; secrets: Secrets; router: Pick<Router, "isAvailable" | "providers"> },
  owner: string,
  sms: OutgoingSms,
  plan: Plan,
): HoldArgs & { id: string } {
  const issuedAt = Date.now();
  const first = plan.providers.find((p) => deps.router.isAvailable(p.spec.name)) ?? plan.providers[0];
  return {
    id: sms.reference,
    issuedAt,
    staleMs: STALE_AFTER_MS,
    deadline: issuedAt + holdSpanMs(deps.config, first ?? { longestSendMs: 0 }),
    sealed: deps.secrets.encrypt(JSON.stringify(sms)),
    owner,
    // With one provider there is nothing to choose: the hold names none, and the row keeps none
    // (its listpack stays small, docs/capacity.md); the recovery re-sends through that provider.
    provider: deps.router.providers.length < 2 ? "" : (first?.spec.name ?? ""),
    route: plan.route,
  };
}

/** The providers a recovery may re-send through, by the name a hold gives. */
export interface HoldProviders {
  /** The provider of that name (or a name it had before); undefined when it is not configured. */
  provider(name: string): SmsProvider | undefined;
  /** The provider of holds that name none (recorded before providers were named): the first declared. */
  readonly providers: readonly SmsProvider[];
}

export interface HoldRecoveryOptions {
  config: HoldSettings;
  store: VerifyStore;
  sms: HoldProviders;
  secrets: Secrets;
  log: Logger;
  now?: () => number;
}

const BATCH = 100;

/**
 * Resolves holds whose owner never recorded the provider's answer (it timed out, or the
 * process died): re-sends the sealed message with the same reference (the provider treats it as
 * the same message) and commits or releases by the answer. Runs at start and every
 * SMS_HOLD_RECOVERY_INTERVAL_MS on each instance; claims are atomic, resolutions idempotent.
 */
export class HoldRecovery {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> = Promise.resolve();
  private closing = false;
  private readonly now: () => number;

  constructor(private readonly o: HoldRecoveryOptions) {
    this.now = o.now ?? Date.now;
  }

  /** Runs one pass now (errors logged, not thrown), then schedules the next ones. */
  start(): void {
    this.run();
  }

  async close(): Promise<void> {
    this.closing = true;
    clearTimeout(this.timer);
    await this.running;
  }

  /** One pass over every customer with holds; returns how many holds it resolved. */
  async sweep(): Promise<number> {
    const { store } = this.o;
    let resolved = 0;
    for (const { customer, listedAt } of await store.holdCustomers()) {
      if (this.closing) break;
      const due = await store.dueHolds(customer, this.now(), BATCH);
      if (due.length === 0) {
        await store.unindexIfEmpty(customer, listedAt, STALE_AFTER_MS);
        continue;
      }
      for (const id of due) {
        if (await this.recover(customer, id)) resolved++;
      }
    }
    return resolved;
  }

  /** Re-sends one due hold's message and resolves the hold by the answer. */
  async recover(customer: string, id: string): Promise<boolean> {
    const { store, log } = this.o;
    const now = this.now();
    const longest = Math.max(0, ...this.o.sms.providers.map((p) => p.longestSendMs));
    const hold = await store.claimHold(
      customer,
      id,
      now,
      now + holdSpanMs(this.o.config, { longestSendMs: longest }),
    );
    if (hold === undefined) return false;
    // Only the provider the hold names may have the message: it alone is asked again.
    const named = hold.provider === undefined || hold.provider === "" ? undefined : hold.provider;
    // An email code's hold (src/verify/email.ts): nothing was charged, and the email provider is
    // not asked twice; the verification is taken back as for any message whose answer is unknown.
    if (named === "email") return store.resolveHold(hold, "release");
    const provider = named === undefined ? this.o.sms.providers[0] : this.o.sms.provider(named);
    if (provider === undefined) {
      log.error("held message's provider is not configured any more; refunding", {
        hold: id,
        provider: named,
      });
      return store.resolveHold(hold, "release");
    }
    let sms: OutgoingSms;
    try {
      sms = JSON.parse(this.o.secrets.decrypt(hold.sealed)) as OutgoingSms;
    } catch (err) {
      // Sealed under another SECRETS_KEY: it cannot be re-sent, so nothing is known to be sent.
      log.error("held message unreadable; refunding", { hold: id, error: errorMessage(err) });
      return store.resolveHold(hold, "release");
    }
    try {
      const { providerId } = await provider.send(sms);
      const done = await store.resolveHold(hold, "commit");
      log.info("held message accepted on re-send; charged", { hold: id, owner: hold.owner });
      const [auth = "", attempt] = id.split(".");
      const ref = { customer, auth, attempt: Number(attempt), route: hold.route ?? "default" };
      await untilDone(store, log, "message id", { hold: id }, () =>
        store.rememberMessage(provider.name, providerId, ref, this.o.config.SMS_RECEIPT_RETENTION_SECONDS),
      );
      return done;
    } catch (err) {
      // Only a lasting refusal of the same reference says the first send was not accepted either;
      // a passing failure (5xx, unreachable, shutting down) says nothing about it: try again later.
      const refused = err instanceof DeliveryError && !err.retryable && !outcomeUnknown(err);
      if (!refused || store.closed()) {
        log.warn("held message still without a lasting answer; next pass", {
          hold: id,
          error: errorMessage(err),
        });
        return false;
      }
      log.warn("held message refused on re-send; refunded", { hold: id, error: errorMessage(err) });
      return store.resolveHold(hold, "release");
    }
  }

  private run(): void {
    const pass = this.sweep().then(
      (n) => {
        if (n > 0) this.o.log.info("holds recovered", { resolved: n });
      },
      (err: unknown) => {
        this.o.log.warn("hold recovery pass failed", { error: errorMessage(err) });
      },
    );
    this.running = pass;
    void pass.then(() => {
      const every = this.o.config.SMS_HOLD_RECOVERY_INTERVAL_MS;
      if (this.closing || every <= 0) return;
      this.timer = setTimeout(() => {
        this.run();
      }, every);
      this.timer.unref();
    });
  }
}
