import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";
import { outcomeOf, type CallRecord } from "./calls.js";

/** What a message provider's answer was, for the sent and failed counters. */
export type Channel = "sms" | "voice" | "whatsapp" | "email";

/**
 * Why an email was not sent: `refused`, the provider turned the message down for good (a 4xx, an
 * SMTP 5xx reply, an address it will not take); `unavailable`, it timed out, was unreachable or
 * answered 5xx (a retry may pass).
 */
export type EmailFailure = "refused" | "unavailable";

/** How a password login ended, for its counter. */
export type PasswordLoginOutcome = "success" | "invalid_credentials" | "too_many_attempts";

/** Seconds: from a cached lookup (about 1 ms) to a provider call near its timeout. */
const CALL_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** Seconds: a Redis PING answers in well under a millisecond on a healthy network. */
const REDIS_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1];

/**
 * The service's Prometheus metrics, one registry per process (`ringfence_` names;
 * docs/operations.md#metrics). Every recorder is synchronous and cheap: it runs inside calls. Gauges read at
 * scrape time (the webhook backlog) are given as functions, so nothing polls between scrapes.
 */
export class Metrics {
  readonly registry = new Registry();
  private readonly requests: Counter<"transport" | "service" | "method" | "code" | "outcome">;
  private readonly duration: Histogram<"transport" | "service" | "method">;
  private readonly refusals: Counter<"rule">;
  private readonly sent: Counter<"channel" | "provider" | "country">;
  private readonly failed: Counter<"channel" | "provider" | "country">;
  private readonly deliveriesSent: Counter<"channel" | "provider" | "country">;
  private readonly deliveryReports: Counter<"channel" | "provider" | "country" | "status">;
  private readonly deliveriesVerified: Counter<"channel" | "provider" | "country">;
  private readonly whatsappStatuses: Counter<"provider" | "status">;
  private readonly channelFallbacks: Counter<"from" | "to" | "reason">;
  private readonly refreshReuses: Counter<"outcome">;
  private readonly providersAvailable: Gauge<"channel" | "provider">;
  private readonly spend: Counter<"country">;
  private readonly emailSent: Counter<"provider">;
  private readonly emailFailed: Counter<"provider" | "reason">;
  private readonly webhooks: Counter<"outcome">;
  private readonly passwordLogins: Counter<"outcome">;
  private readonly passkeyRegistrations: Counter<"outcome">;
  private readonly passkeyAssertions: Counter<"use" | "outcome">;
  private readonly redisErrors: Counter<"kind">;
  private readonly redisPing: Histogram;
  private readonly fraudDecisions: Counter<"api" | "action" | "rule">;
  private readonly verificationsSent: Counter<"api" | "country">;
  private readonly verificationsVerified: Counter<"api" | "country">;
  /** Read at scrape time for the webhook backlog gauge; set once the outbox exists. */
  webhookBacklog: (() => Promise<number>) | undefined;
  /** Read at scrape time: the webhook endpoints this process holds paused. */
  webhookEndpointsPaused: (() => number) | undefined;
  /** Read at scrape time for the Redis up gauge: whether the watchdog's last PING was answered. */
  redisUp: (() => boolean) | undefined;

  constructor() {
    const registers = [this.registry];
    const backlog = () => this.webhookBacklog?.();
    const endpointsPaused = () => this.webhookEndpointsPaused?.();
    const redisUp = () => this.redisUp?.();
    collectDefaultMetrics({ register: this.registry });
    this.requests = new Counter({
      name: "ringfence_requests_total",
      help: "Calls answered, by transport (grpc, http), method, code (ok or the error code) and outcome (ok, client_error, server_error)",
      labelNames: ["transport", "service", "method", "code", "outcome"],
      registers,
    });
    this.duration = new Histogram({
      name: "ringfence_request_duration_seconds",
      help: "Time from a call's arrival to its answer, by transport and method",
      labelNames: ["transport", "service", "method"],
      buckets: CALL_BUCKETS,
      registers,
    });
    this.refusals = new Counter({
      name: "ringfence_abuse_refusals_total",
      help: "Calls refused by a rate-limit or spam rule, by the setting of the rule (RATE_LIMIT_NUMBER, SPAM_RANGE_BURST, ...)",
      labelNames: ["rule"],
      registers,
    });
    this.sent = new Counter({
      name: "ringfence_messages_sent_total",
      help: "Messages the provider accepted, by channel (sms, voice, whatsapp, email), provider and destination country (but email)",
      labelNames: ["channel", "provider", "country"],
      registers,
    });
    this.failed = new Counter({
      name: "ringfence_messages_failed_total",
      help: "Messages the provider did not accept (refused, timed out, unreachable), by channel, provider and country",
      labelNames: ["channel", "provider", "country"],
      registers,
    });
    this.deliveriesSent = new Counter({
      name: "ringfence_delivery_sent_total",
      help: "Submits tried to a delivery provider, accepted or not, by channel (sms, voice, whatsapp), provider (its DELIVERY_PROVIDERS name) and destination country",
      labelNames: ["channel", "provider", "country"],
      registers,
    });
    this.deliveryReports = new Counter({
      name: "ringfence_delivery_reports_total",
      help: "Delivery reports of the messages a provider accepted, by channel, provider, country and status (delivered, undelivered, rejected; an SMPP UNDELIV is undelivered)",
      labelNames: ["channel", "provider", "country", "status"],
      registers,
    });
    this.deliveriesVerified = new Counter({
      name: "ringfence_delivery_verified_total",
      help: "Codes checked right, by the channel, provider and destination country of the message that carried them",
      labelNames: ["channel", "provider", "country"],
      registers,
    });
    this.whatsappStatuses = new Counter({
      name: "ringfence_whatsapp_statuses_total",
      help: "Message statuses a WhatsApp provider's signed webhooks gave, by provider and status (sent, delivered, read, failed), repeats included",
      labelNames: ["provider", "status"],
      registers,
    });
    this.channelFallbacks = new Counter({
      name: "ringfence_channel_fallbacks_total",
      help: "V2 codes moved to the next channel, by the channel left, the channel taken and why (refused, undelivered, silence)",
      labelNames: ["from", "to", "reason"],
      registers,
    });
    this.refreshReuses = new Counter({
      name: "ringfence_refresh_reuses_total",
      help: "Refresh tokens presented again after their first use: within REFRESH_REUSE_GRACE_SECONDS (grace, the first answer again) or not (revoked, the session ended)",
      labelNames: ["outcome"],
      registers,
    });
    this.providersAvailable = new Gauge({
      name: "ringfence_provider_available",
      help: "1 while a delivery provider is available, 0 while its circuit is open or its SMPP bind is down, by channel and provider",
      labelNames: ["channel", "provider"],
      registers,
      // Each worker keeps its own circuits: with WORKERS > 1 the instance is up only while every worker is.
      aggregator: "min",
    });
    this.fraudDecisions = new Counter({
      name: "ringfence_fraud_decisions_total",
      help: "Decisions of the fraud engine on code-carrying sends, by api (v1, v2, session), action (allow, block, would_block) and rule (none, geo, destination_surge, conversion_drop, new_destination_budget, source_fanout)",
      labelNames: ["api", "action", "rule"],
      registers,
    });
    this.verificationsSent = new Counter({
      name: "ringfence_verifications_sent_total",
      help: "Code-carrying messages the fraud engine let through, by api and destination country",
      labelNames: ["api", "country"],
      registers,
    });
    this.verificationsVerified = new Counter({
      name: "ringfence_verifications_verified_total",
      help: "Sends converted (a right code, V1 feedback onboarded), by api and destination country: divided by ringfence_verifications_sent_total, the conversion",
      labelNames: ["api", "country"],
      registers,
    });
    this.spend = new Counter({
      name: "ringfence_sms_spend_total",
      help: "Amount charged to accounts for V1 messages the provider accepted, in the currency of SMS_PRICES, by destination country",
      labelNames: ["country"],
      registers,
    });
    this.emailSent = new Counter({
      name: "ringfence_email_sent_total",
      help: "Emails (session login and step-up codes) the email provider accepted, by provider (log, http, smtp)",
      labelNames: ["provider"],
      registers,
    });
    this.emailFailed = new Counter({
      name: "ringfence_email_failed_total",
      help: "Emails the email provider did not accept, by provider and reason (refused: for good; unavailable: timed out, unreachable or 5xx)",
      labelNames: ["provider", "reason"],
      registers,
    });
    this.webhooks = new Counter({
      name: "ringfence_webhook_deliveries_total",
      help: "Webhook delivery attempts by outcome: delivered, retry (to be tried again), dropped (given up or refused)",
      labelNames: ["outcome"],
      registers,
    });
    this.passwordLogins = new Counter({
      name: "ringfence_password_logins_total",
      help: "Password logins by outcome: success, invalid_credentials (a wrong password, identifier or a user without one), too_many_attempts (refused by a failure window)",
      labelNames: ["outcome"],
      registers,
    });
    this.passkeyRegistrations = new Counter({
      name: "ringfence_passkey_registrations_total",
      help: "Passkey registrations by outcome: success, invalid_credential (the authenticator's answer did not verify), expired_challenge, taken (a credential registered already), too_many (the user holds the most)",
      labelNames: ["outcome"],
      registers,
    });
    this.passkeyAssertions = new Counter({
      name: "ringfence_passkey_logins_total",
      help: "Passkey assertions by use (login, step_up) and outcome: success, invalid_credentials, counter_backwards (passkey.suspicious emitted), too_many_attempts (refused by a password failure window)",
      labelNames: ["use", "outcome"],
      registers,
    });
    new Gauge({
      name: "ringfence_webhook_backlog",
      help: "Webhook streams waiting for delivery (queued, retrying or being delivered), read from Redis at scrape time",
      registers,
      // Every worker of a cluster reads the same queue: their answers are one value, not a sum.
      aggregator: "max",
      async collect() {
        const read = backlog();
        if (read !== undefined) this.set(await read.catch(() => Number.NaN));
      },
    });
    new Gauge({
      name: "ringfence_webhook_endpoints_paused",
      help: "Webhook endpoints paused because their last POSTs went unanswered (timed out, unreachable); their deliveries wait, kept, for the pause to end",
      registers,
      // Each worker pauses the endpoints it saw fail: the most any worker holds paused.
      aggregator: "max",
      collect() {
        const paused = endpointsPaused();
        if (paused !== undefined) this.set(paused);
      },
    });
    this.redisErrors = new Counter({
      name: "ringfence_redis_errors_total",
      help: "Redis failures: connection (a socket error) and call (a call answered 503 because Redis did not answer)",
      labelNames: ["kind"],
      registers,
    });
    new Gauge({
      name: "ringfence_redis_up",
      help: "1 while Redis answers the health watchdog's PING (within a second), 0 while it does not",
      registers,
      // With WORKERS > 1 the instance is up only while every worker reaches Redis.
      aggregator: "min",
      collect() {
        const up = redisUp();
        if (up !== undefined) this.set(up ? 1 : 0);
      },
    });
    this.redisPing = new Histogram({
      name: "ringfence_redis_ping_duration_seconds",
      help: "Round trip of the health watchdog's PING to Redis (about one a second)",
      buckets: REDIS_BUCKETS,
      registers,
    });
  }

  /** The call observer: counts and times every answered call, and the rule that refused it. */
  readonly observe = (r: CallRecord): void => {
    this.requests.inc({
      transport: r.transport,
      service: r.service,
      method: r.method,
      code: r.code,
      outcome: outcomeOf(r),
    });
    this.duration.observe(
      { transport: r.transport, service: r.service, method: r.method },
      r.durationMs / 1000,
    );
    if (r.refusedBy !== undefined) this.refusals.inc({ rule: r.refusedBy });
    if (r.code === "unavailable") this.redisErrors.inc({ kind: "call" });
  };

  message(channel: Channel, provider: string, country: string, ok: boolean): void {
    (ok ? this.sent : this.failed).inc({ channel, provider, country });
  }

  /** One submit tried to a delivery provider, whatever its answer. */
  deliverySent(channel: string, provider: string, country: string): void {
    this.deliveriesSent.inc({ channel, provider, country });
  }

  /** A delivery report of a message the provider accepted: its first only, as repeats change nothing. */
  deliveryReport(
    channel: string,
    provider: string,
    country: string,
    status: "delivered" | "undelivered" | "rejected",
  ): void {
    this.deliveryReports.inc({ channel, provider, country, status });
  }

  /** One code checked right, counted to the provider whose message carried it. */
  deliveryVerified(channel: string, provider: string, country: string): void {
    this.deliveriesVerified.inc({ channel, provider, country });
  }

  /** One status of a WhatsApp message, as its provider's signed webhook gave it. */
  whatsappStatus(provider: string, status: "sent" | "delivered" | "read" | "failed"): void {
    this.whatsappStatuses.inc({ provider, status });
  }

  /** A V2 code moved from channel `from` to `to`: refused by every provider, reported undelivered, or silent. */
  channelFallback(from: string, to: string, reason: "refused" | "undelivered" | "silence"): void {
    this.channelFallbacks.inc({ from, to, reason });
  }

  /** A refresh token presented again: answered as its first use (`grace`), or the session revoked. */
  refreshReuse(outcome: "grace" | "revoked"): void {
    this.refreshReuses.inc({ outcome });
  }

  /** Whether a delivery provider is available now: its circuit closed and, for SMPP, its bind up. */
  providerAvailable(channel: string, provider: string, up: boolean): void {
    this.providersAvailable.set({ channel, provider }, up ? 1 : 0);
  }

  /** The email provider in use: its series exist from the start, at 0, for rates and alerts. */
  emailProvider(provider: string): void {
    this.emailSent.inc({ provider }, 0);
    for (const reason of ["refused", "unavailable"] as const) this.emailFailed.inc({ provider, reason }, 0);
  }

  /** One email: sent, or the reason it was not. */
  email(provider: string, outcome: "sent" | EmailFailure): void {
    if (outcome === "sent") this.emailSent.inc({ provider });
    else this.emailFailed.inc({ provider, reason: outcome });
  }

  /** One decision of the fraud engine; a send it let through counts as sent in its country. */
  fraudDecision(api: string, action: string, rule: string, country: string): void {
    this.fraudDecisions.inc({ api, action, rule });
    if (action !== "block") this.verificationsSent.inc({ api, country });
  }

  /** One send converted. */
  verified(api: string, country: string): void {
    this.verificationsVerified.inc({ api, country });
  }

  charged(country: string, micros: number): void {
    this.spend.inc({ country }, micros / 1_000_000);
  }

  webhook(outcome: "delivered" | "retry" | "dropped"): void {
    this.webhooks.inc({ outcome });
  }

  /** One password login's outcome. */
  passwordLogin(outcome: PasswordLoginOutcome): void {
    this.passwordLogins.inc({ outcome });
  }

  passkeyRegistration(
    outcome: "success" | "invalid_credential" | "expired_challenge" | "taken" | "too_many",
  ): void {
    this.passkeyRegistrations.inc({ outcome });
  }

  passkeyAssertion(
    use: "login" | "step_up",
    outcome: "success" | "invalid_credentials" | "counter_backwards" | "too_many_attempts",
  ): void {
    this.passkeyAssertions.inc({ use, outcome });
  }

  redisError(): void {
    this.redisErrors.inc({ kind: "connection" });
  }

  redisPinged(seconds: number): void {
    this.redisPing.observe(seconds);
  }

  /** The exposition text and its content type, for `GET /metrics`. */
  async exposition(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}
