/**
 * V2 verification of an email address (docs/v2-api.md#email): the code sent by the email provider
 * the session service uses, under the same windows (per address, client address, device, account)
 * and the same row, index and check as a phone number's; free, so neither charged nor judged by
 * the fraud engine.
 */
import { randomUUID } from "node:crypto";
import { RingfenceError } from "../errors.js";
import { errorMessage } from "../log.js";
import { limitSubject } from "../net/cidr.js";
import type { CallScope } from "../observability/calls.js";
import type { StoredAccount } from "../accounts/account.js";
import { ACCOUNT_SECRET_KIND } from "../accounts/account.js";
import type { OutgoingEmail } from "../messaging/email-provider.js";
import { renderOtpEmail } from "../messaging/email-templates.js";
import { defaultEmailSender } from "../messaging/settings.js";
import { newCode } from "../otp/code.js";
import { secretRef } from "../webhooks/stream.js";
import type { VerifyEngine, RetryOutcome, SendOutcome } from "./engine.js";
import type { EmailCodes } from "./deps.js";
import { EVENT_SHAPES } from "./events.js";
import { createdEvent, eventContext } from "./event-records.js";
import { holdSpanMs, settleHold, STALE_AFTER_MS, unavailable } from "./holds.js";
import type { HoldArgs, SendPlace, Signals, StoredAuthentication } from "./store.js";
import { compactEvent } from "./row.js";
import { kick } from "./delivery.js";

/** An email verification's creation, validated by V2. */
export interface EmailSendRequest {
  /** The address, its domain lower-cased. */
  email: string;
  ip: string;
  deviceId: string;
  signals: Signals;
  locale: string;
  callbackUrl: string;
  correlationId: string;
  codeLength: number;
  /** The uuid the target index named when the caller looked ("" for none). */
  indexed: string;
}

/** The place of an email send in the windows: the address stands for the number and its range. */
function emailPlace(
  customer: string,
  auth: string,
  email: string,
  ip: string,
  device: string,
  t: number,
): SendPlace {
  return {
    customer,
    auth,
    phone: email,
    ip: ip === "" ? "-" : ip,
    device: device === "" ? "-" : device,
    // The address alone: a range of addresses (a domain) would let one caller stop its neighbours.
    range: email,
    month: new Date(t).toISOString().slice(0, 7),
  };
}

/** The hold of an email's send: nothing to charge, released (the verification taken back) if it is refused. */
function emailHold(
  engine: VerifyEngine,
  msg: OutgoingEmail,
  longestSendMs: number,
): HoldArgs & { id: string } {
  const issuedAt = Date.now();
  return {
    id: msg.reference,
    issuedAt,
    staleMs: STALE_AFTER_MS,
    deadline: issuedAt + holdSpanMs(engine.deps.config, { longestSendMs }),
    sealed: engine.deps.secrets.encrypt(JSON.stringify(msg)),
    owner: engine.owner,
    // No delivery provider: a recovery finds none of this name and releases it (nothing was charged).
    provider: "email",
    route: "default",
  };
}

/** Hands a held email to the provider, then settles its hold: committed when accepted, else released. */
async function deliverEmail(
  engine: VerifyEngine,
  emails: EmailCodes,
  hold: Parameters<typeof settleHold>[2],
  msg: OutgoingEmail,
  call: CallScope,
): Promise<void> {
  const { store } = engine.deps;
  try {
    await emails.provider.send(msg, call);
  } catch (err) {
    await settleHold(store, call.log, hold, "release");
    if (err instanceof RingfenceError) throw err;
    call.log.error("email code not accepted", { reference: msg.reference, error: errorMessage(err) });
    throw new RingfenceError("internal_server_error", "the email could not be sent; nothing was recorded");
  }
  await settleHold(store, call.log, hold, "commit");
}

function emailMessage(
  emails: EmailCodes,
  to: string,
  code: string,
  locale: string,
  lifetimeMinutes: number,
  reference: string,
): OutgoingEmail {
  const text = renderOtpEmail({ code, locale, lifetimeMinutes, purpose: "step_up" });
  return { to, from: defaultEmailSender(emails.config), subject: text.subject, body: text.body, reference };
}

/** Creates an email verification: windows, row and index as a number's, then the email. */
export async function sendEmailCode(
  engine: VerifyEngine,
  emails: EmailCodes,
  account: StoredAccount,
  req: EmailSendRequest,
  call: CallScope,
): Promise<SendOutcome> {
  const { config, store, fraud } = engine.deps;
  const t = Date.now();
  const authUuid = randomUUID();
  const code = newCode(req.codeLength);
  const createdAt = new Date(t).toISOString();
  const expiresMs = t + engine.code.ttlSeconds * 1000;
  const expiresAt = new Date(expiresMs).toISOString();
  const ip = req.ip === "" ? "" : limitSubject(req.ip);
  const place = emailPlace(account.customerUuid, authUuid, req.email, ip, req.deviceId, t);
  const msg = emailMessage(
    emails,
    req.email,
    code,
    req.locale,
    Math.ceil(engine.code.ttlSeconds / 60),
    `${authUuid}.1`,
  );
  const facts = {
    authUuid,
    phone: req.email,
    correlationId: req.correlationId,
    priceMicros: 0,
    currency: config.SMS_CURRENCY,
  };
  const ctx = eventContext(facts, expiresAt);
  const shapes = EVENT_SHAPES.v2;
  const held = emailHold(engine, msg, 30_000);
  const { status, refusedBy } = await store.send(
    place,
    engine.rules,
    {
      now: t,
      fraud: false,
      authUuid,
      phone: req.email,
      staticSpam: false,
      hasIp: ip !== "",
      hasDevice: req.deviceId !== "",
      price: 0,
      codeHash: engine.hashCode(authUuid, code),
      keepUntil: expiresMs + config.AUTHENTICATION_RETENTION_SECONDS * 1000,
      refusedUntil: t + config.REFUSED_RETENTION_SECONDS * 1000,
      authentication: {
        api: "v2",
        customerUuid: account.customerUuid,
        phoneNumber: req.email,
        countryCode: "",
        createdAt,
        expiresAt,
        expiresAtMs: expiresMs,
        correlationId: req.correlationId,
        locale: req.locale,
        templateId: "",
        from: msg.from,
        appRealm: "",
        callbackUrl: req.callbackUrl,
        priceMicros: 0,
        codeLength: req.codeLength,
        channels: "email",
        signals: req.signals,
      },
      created: createdEvent(shapes, facts, createdAt, expiresAt, ctx),
      target: { running: req.indexed },
      hook:
        req.callbackUrl === ""
          ? null
          : { url: req.callbackUrl, secretRef: secretRef(ACCOUNT_SECRET_KIND, account.customerUuid) },
    },
    held,
    fraud.unjudgedKeys(account.customerUuid),
  );
  if (status === "stale") throw unavailable("the service is temporarily unavailable, try again shortly");
  if (refusedBy !== undefined) call.noteRefusal(refusedBy);
  if (status === "pending") {
    await deliverEmail(engine, emails, store.holdOf(place, msg.reference, "send"), msg, call);
    const sent = shapes.sent(facts, 1, "send", new Date().toISOString());
    await store
      .appendEvent(account.customerUuid, authUuid, sent, compactEvent(sent, ctx))
      .catch(() => undefined);
  }
  if (req.callbackUrl !== "")
    await kick(engine.deps, store.authKeys(account.customerUuid, authUuid).events, call.log);
  return { authUuid, status, refusedBy, createdAt, expiresAt };
}

/** Retries a running email verification: a new code by email, under the retry rules. */
export async function retryEmailCode(
  engine: VerifyEngine,
  emails: EmailCodes,
  account: StoredAccount,
  authUuid: string,
  auth: StoredAuthentication,
  call: CallScope,
): Promise<RetryOutcome> {
  const { store, fraud } = engine.deps;
  const t = Date.now();
  const code = newCode(auth.codeLength > 0 ? auth.codeLength : engine.code.length);
  const attempt = auth.attempts + 1;
  const place = emailPlace(account.customerUuid, authUuid, auth.phoneNumber, "", "", t);
  const minutes = Math.max(1, Math.ceil((auth.expiresAtMs - t) / 60_000));
  const msg = emailMessage(emails, auth.phoneNumber, code, auth.locale, minutes, `${authUuid}.${attempt}`);
  const held = emailHold(engine, msg, 30_000);
  const r = await store.retry(
    place,
    engine.rules,
    {
      now: t,
      attempt,
      codeHash: engine.hashCode(authUuid, code),
      price: 0,
      member: `${authUuid}:${attempt}`,
      fraud: false,
    },
    held,
    fraud.unjudgedKeys(account.customerUuid),
  );
  if (r.status === "not_found") {
    throw new RingfenceError("no_associated_auth_found", "no verification of this customer has this id");
  }
  if (r.status === "stale") throw unavailable("the service is temporarily unavailable, try again shortly");
  if (r.refusedBy !== undefined) call.noteRefusal(r.refusedBy);
  if (r.status === "approved")
    await deliverEmail(engine, emails, store.holdOf(place, msg.reference, "retry"), msg, call);
  return { status: r.status, retries: r.retries, nextRetryAtMs: r.nextRetryAtMs, refusedBy: r.refusedBy };
}
