/**
 * A V2 code falling back to the next channel of its verification (docs/v2-api.md#fallback): when
 * its message is reported failed or undelivered, or, on WhatsApp, not reported delivered within
 * CHANNEL_FALLBACK_SECONDS. The same code goes by the next channel the account allows, charged at
 * that channel's price once a provider accepts it; never after a right code, never past the code's
 * life (channels.lua moves the row on once, whichever instance or report asks first).
 */
import { errorMessage } from "../log.js";
import type { Channel } from "../messaging/providers.js";
import { parseE164 } from "../phone/e164.js";
import type { VerifyDeps } from "./deps.js";
import { channelPrice, messageFor, plannedChannels, renderAgain } from "./channels.js";
import type { FallbackEntry } from "./hold-store.js";
import { untilDone } from "./holds.js";

type FallbackDeps = Pick<
  VerifyDeps,
  "store" | "router" | "secrets" | "log" | "config" | "accounts" | "fraud" | "metrics"
>;

/** Schedules the silence fall back of a WhatsApp message accepted now, when a channel follows it. */
export async function scheduleSilence(
  deps: Pick<VerifyDeps, "store" | "config" | "log">,
  entry: FallbackEntry,
  planned: readonly string[],
  now: number,
): Promise<void> {
  if (entry.channel !== "whatsapp" || planned.indexOf(entry.channel) >= planned.length - 1) return;
  await untilDone(deps.store, deps.log, "fallback schedule", { channel: entry.channel }, () =>
    deps.store.scheduleFallback(entry, now + deps.config.CHANNEL_FALLBACK_SECONDS * 1000),
  );
}

/**
 * Sends attempt `entry.attempt`'s code by `next.channel` (the row already moved there), and on
 * through the channels after it while every provider of one refuses. Never throws: what fails is
 * logged, and the verification stays on the last channel it reached.
 */
export async function fallForward(
  deps: FallbackDeps,
  entry: Omit<FallbackEntry, "channel">,
  next: { channel: string; sealed: string },
  now: number,
): Promise<void> {
  const { store, router, log } = deps;
  try {
    const [found, account] = await Promise.all([
      store.get(entry.customer, entry.auth),
      deps.accounts.get(entry.customer),
    ]);
    const auth = found?.auth;
    const phone = auth === undefined ? undefined : parseE164(auth.phoneNumber);
    if (auth === undefined || account === undefined || phone === undefined) return;
    const code = deps.secrets.decrypt(next.sealed);
    const rendered = renderAgain(auth, account.templates, code, now);
    const destination = await deps.fraud.destinationOf(phone);
    const planned = plannedChannels(auth.channels);
    let channel: string | undefined = next.channel;
    while (channel !== undefined) {
      const ch = channel as Channel;
      const price = channelPrice(deps.config, ch, phone.countryCode);
      const reference = `${entry.auth}.${entry.attempt}-${ch}`;
      const sms = messageFor(
        ch,
        { to: phone.e164, from: auth.from, body: rendered.body, locale: rendered.locale, reference },
        code,
      );
      const plan = router.plan(ch, destination);
      for (const p of plan.providers) {
        if (!router.take(p)) continue;
        let providerId: string;
        try {
          ({ providerId } = await p.send(sms));
        } catch (err) {
          router.submitted(p, plan, err);
          log.warn("fallback message not accepted by this provider", {
            channel: ch,
            provider: p.spec.name,
            error: errorMessage(err),
          });
          continue;
        }
        router.submitted(p, plan, true);
        const fields = { reference };
        await Promise.all([
          untilDone(store, log, "fallback charge", fields, () =>
            store.chargeResend(entry.customer, entry.auth, entry.attempt, price, now, ch),
          ),
          untilDone(store, log, "message id", fields, () =>
            store.rememberMessage(
              p.spec.name,
              providerId,
              {
                customer: entry.customer,
                auth: entry.auth,
                attempt: entry.attempt,
                route: plan.route,
                channel: ch,
                price,
              },
              deps.config.SMS_RECEIPT_RETENTION_SECONDS,
            ),
          ),
          untilDone(store, log, "carrier", fields, () =>
            store.noteCarrier(entry.customer, entry.auth, p.spec.name, plan.route),
          ),
          scheduleSilence(
            deps,
            { customer: entry.customer, auth: entry.auth, attempt: entry.attempt, channel: ch },
            planned,
            now,
          ),
        ]);
        deps.metrics.charged(phone.countryCode, price);
        log.info("code sent by the next channel", { channel: ch, provider: p.spec.name });
        return;
      }
      // Every provider of this channel refused it: the one after it, when the code may still go.
      channel = (await store.nextChannel(entry.customer, entry.auth, entry.attempt, ch, Date.now()))?.channel;
      if (channel !== undefined) deps.metrics.channelFallback(ch, channel, "refused");
    }
    log.warn("fallback ended: no channel left took the code", { attempt: entry.attempt });
  } catch (err) {
    log.error("fallback failed", { error: errorMessage(err) });
  }
}

/** How often each instance looks for WhatsApp messages not reported delivered in time. */
export const FALLBACK_POLL_MS = 1_000;

/**
 * Carries out the silence fall backs that are due, on any instance (the one that scheduled one
 * may be gone): each is taken by one instance (ZREM), and the row moves on once (channels.lua).
 */
export class FallbackWorker {
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private running: Promise<void> | undefined;

  constructor(
    private readonly deps: FallbackDeps,
    private readonly now: () => number = Date.now,
  ) {}

  /** One pass: every fall back due now. */
  async runOnce(): Promise<void> {
    const { store } = this.deps;
    for (;;) {
      const now = this.now();
      const due = await store.dueFallbacks(now, 100);
      for (const entry of due) {
        if (!(await store.takeFallback(entry))) continue;
        const next = await store.nextChannel(entry.customer, entry.auth, entry.attempt, entry.channel, now);
        if (next === undefined) continue;
        this.deps.metrics.channelFallback(entry.channel, next.channel, "silence");
        await fallForward(this.deps, entry, next, now);
      }
      if (due.length < 100) return;
    }
  }

  start(): void {
    const tick = () => {
      if (this.stopped) return;
      this.timer = setTimeout(() => {
        this.running = this.runOnce()
          .catch((err: unknown) => {
            this.deps.log.warn("fallbacks not read", { error: errorMessage(err) });
          })
          .finally(tick);
      }, FALLBACK_POLL_MS);
      this.timer.unref();
    };
    tick();
  }

  async close(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }
}
