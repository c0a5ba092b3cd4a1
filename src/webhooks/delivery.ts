/**
 * The delivery of one job: takes its endpoint's turn and its stream's lock, then POSTs the stream's
 * envelopes, signed, in order from the cursor, and settles each one's outcome (delivered, to be
 * retried, dropped).
 */
import { randomBytes } from "node:crypto";
import { UnrecoverableError, type Job } from "bullmq";
import { errorMessage, type Logger } from "../log.js";
import { OutboundRefused } from "../net/outbound.js";
import type { Keys, RedisClient } from "../redis/client.js";
import { parseHttpUrl } from "../net/validate.js";
import { advanceCursor, finish, position, releaseLock } from "./cursor.js";
import { endpointOf, type EndpointScheduler } from "./endpoints.js";
import { WebhookDeliveryError, type WebhookOutboxOptions } from "./options.js";
import {
  jobData,
  jobIdFor,
  later,
  LIVE_STATES,
  type DeliveryJob,
  type DeliveryQueue,
  type QueuedDelivery,
} from "./queue.js";
import { SIGNATURE_HEADER, signWebhook } from "./signature.js";
import { outboxKeys, type OutboxKeys } from "./keys.js";
import { readEnvelopeHead } from "./stream.js";

/** When another worker delivers the stream, look again this soon. */
const LOCK_BUSY_RETRY_MS = 200;

/** What delivery needs from the outbox that runs it. */
export interface DeliveryNeeds {
  redis: RedisClient;
  keys: Keys;
  log: Logger;
  /** The outbox's options, for the hooks' calls: outbound, resolveSecret, userAgent, onAttempt. */
  options: Pick<WebhookOutboxOptions, "outbound" | "resolveSecret" | "userAgent" | "onAttempt">;
  /** Per POST (WebhookOutboxOptions.timeoutMs, its default applied). */
  timeoutMs: number;
  /** How long after its `created_at` an envelope not delivered is dropped. */
  giveUpAfterMs: number;
  endpoints: EndpointScheduler;
  /** The queue, to find a newer job of the same stream. */
  producer: () => DeliveryQueue;
  /** True once the outbox is closing: jobs are put back for the next worker. */
  closing: () => boolean;
}

interface Target {
  url: URL;
  secret: string;
}

export class StreamDelivery {
  private readonly redis: RedisClient;
  private readonly log: Logger;
  private readonly options: DeliveryNeeds["options"];
  private readonly timeoutMs: number;
  private readonly lockTtlMs: number;
  private readonly endpoints: EndpointScheduler;

  constructor(private readonly needs: DeliveryNeeds) {
    this.redis = needs.redis;
    this.log = needs.log;
    this.options = needs.options;
    this.timeoutMs = needs.timeoutMs;
    // Set when taken and renewed with every envelope delivered: it only has to outlive one POST.
    this.lockTtlMs = 2 * this.timeoutMs + 10_000;
    this.endpoints = needs.endpoints;
  }

  async process(job: QueuedDelivery, token?: string): Promise<string> {
    // Closing: leave the job to the next worker.
    if (this.needs.closing()) return later(job, token, 10);
    const parsed = jobData.safeParse(job.data);
    if (!parsed.success) throw new UnrecoverableError("not a webhook delivery job");
    const { list } = parsed.data;
    const k = outboxKeys(list, this.needs.keys);
    const [{ length, delivered }, hook] = await Promise.all([
      position(this.redis, list, k),
      this.redis.hgetall(k.hook),
    ]);
    if (delivered >= length) {
      if (await finish(this.redis, list, k)) return "delivered";
    } else if (await this.superseded(job, list, length)) {
      return "superseded";
    }
    // No endpoint (no hook, not http): nothing is POSTed, the delivery fails as it did before.
    const endpoint = endpointOf(hook);
    if (endpoint !== undefined) {
      const turn = this.endpoints.take(endpoint, Date.now());
      if (!turn.run) {
        this.log.debug("webhook delivery parked", { list, reason: turn.reason, delayMs: turn.delayMs });
        return later(job, token, turn.delayMs);
      }
    }
    try {
      const lockToken = randomBytes(16).toString("base64url");
      if ((await this.redis.set(k.lock, lockToken, "PX", this.lockTtlMs, "NX")) === null) {
        return await later(job, token, LOCK_BUSY_RETRY_MS);
      }
      try {
        await this.deliverStream(job, token, list, k, lockToken, hook, endpoint);
      } finally {
        await releaseLock.run(this.redis, { lock: k.lock }, { token: lockToken }).catch((err: unknown) => {
          this.log.warn("webhook lock not released; it expires", { list, error: errorMessage(err) });
        });
      }
      return "delivered";
    } finally {
      if (endpoint !== undefined) this.endpoints.done(endpoint);
    }
  }

  /** Delivers from the cursor on, in order, until the stream is fully delivered or a POST fails. */
  private async deliverStream(
    job: QueuedDelivery,
    token: string | undefined,
    list: string,
    k: OutboxKeys,
    lockToken: string,
    hook: Record<string, string>,
    endpoint: string | undefined,
  ): Promise<void> {
    let target: Promise<Target> | undefined;
    for (;;) {
      // Closing: the POST in flight has finished; the next worker takes the rest.
      if (this.needs.closing()) await later(job, token, 10);
      const delivered = Number((await this.redis.get(k.delivered)) ?? "0");
      const envelope = await this.redis.lindex(list, delivered);
      if (envelope === null) {
        if (await finish(this.redis, list, k)) return;
        continue;
      }
      const advance = async () => {
        const [moved] = (await advanceCursor.run(
          this.redis,
          { stream: list, delivered: k.delivered, lock: k.lock },
          { token: lockToken, expected: delivered, count: delivered + 1, lockTtlMs: this.lockTtlMs },
        )) as ["advanced" | "lock_lost" | "count_moved", number?];
        // Our lock expired and another worker took over: let it go on, look again later.
        if (moved !== "advanced") await later(job, token, LOCK_BUSY_RETRY_MS);
      };
      const head = readEnvelopeHead(envelope);
      if (head === undefined) {
        this.log.error("webhook envelope unreadable, dropped", { list, index: delivered });
        this.options.onAttempt?.("dropped");
        await advance();
        continue;
      }
      target ??= this.target(hook);
      const failure = await this.post(target, envelope, head.id, list, endpoint);
      if (failure instanceof OutboundRefused) {
        // Not a passing fault: the hook's address is refused (OUTBOUND_ALLOWED_CIDRS), so no retry.
        this.log.error("webhook dropped: its address is not allowed", {
          list,
          id: head.id,
          reason: failure.message,
        });
        this.options.onAttempt?.("dropped");
        await advance();
        continue;
      }
      if (failure === undefined) {
        this.options.onAttempt?.("delivered");
        await advance();
        this.log.debug("webhook delivered", { list, id: head.id });
        continue;
      }
      const retryUntil = head.createdAtMs + this.needs.giveUpAfterMs;
      if (Date.now() >= retryUntil) {
        this.log.error("webhook dropped: not delivered in time", { list, id: head.id, reason: failure });
        this.options.onAttempt?.("dropped");
        await advance();
        continue;
      }
      this.log.warn("webhook not delivered, will retry", { list, id: head.id, reason: failure });
      this.options.onAttempt?.("retry");
      throw new WebhookDeliveryError(`${head.id}: ${failure}`, retryUntil);
    }
  }

  /**
   * One POST; undefined when the receiver answered 2xx, an OutboundRefused when its address may
   * not be called, else why not (no URL, body or secret in it). Tells the endpoint's schedule
   * whether the receiver answered at all.
   */
  private async post(
    target: Promise<Target>,
    envelope: string,
    id: string,
    list: string,
    endpoint: string | undefined,
  ): Promise<string | OutboundRefused | undefined> {
    let started = 0;
    try {
      const { url, secret } = await target;
      started = Date.now();
      const res = await this.options.outbound.request(url, {
        method: "POST",
        body: envelope,
        timeoutMs: this.timeoutMs,
        headers: {
          "content-type": "application/json",
          "user-agent": this.options.userAgent ?? "ringfence-webhooks/1",
          [SIGNATURE_HEADER]: signWebhook(secret, envelope, Math.floor(Date.now() / 1000)),
          "X-Webhook-Id": id,
        },
      });
      this.posted(endpoint, true, started, list);
      return res.status >= 200 && res.status < 300 ? undefined : `receiver answered ${res.status}`;
    } catch (err) {
      if (err instanceof OutboundRefused) return err;
      // Started: the POST went out (its address allowed) and no answer came back.
      if (started > 0) this.posted(endpoint, false, started, list);
      return errorMessage(err);
    }
  }

  private posted(endpoint: string | undefined, answered: boolean, started: number, list: string): void {
    if (endpoint === undefined) return;
    const now = Date.now();
    const pauseMs = this.endpoints.posted(endpoint, answered, now - started, now);
    if (pauseMs !== undefined) {
      // The stream names the endpoint's owner; its URL may carry a token, so it is not logged.
      this.log.warn("webhook endpoint paused: it does not answer", { list, pauseMs });
    }
  }

  /** Where and with which secret to POST, from the stream's hook as read when the job began. */
  private async target(hook: Record<string, string>): Promise<Target> {
    if (hook.url === undefined || hook.secret_ref === undefined) throw new Error("the stream has no hook");
    const url = parseHttpUrl(hook.url);
    if (url === undefined) throw new Error("the hook's url is not http(s)");
    const secret = await this.options.resolveSecret(hook.secret_ref);
    if (secret === undefined) throw new Error("no secret for the hook's secret_ref");
    return { url, secret };
  }

  /**
   * True when a newer job of the same stream (the one for its current length) is waiting, delayed
   * or running: it delivers everything up to that length, so this one may end, and a failing
   * receiver sees one retry schedule per stream rather than one per event.
   */
  private async superseded(job: Job<DeliveryJob>, list: string, length: number): Promise<boolean> {
    const newest = jobIdFor(list, length);
    if (job.id === newest) return false;
    return LIVE_STATES.includes(await this.needs.producer().getJobState(newest));
  }
}
