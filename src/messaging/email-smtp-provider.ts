import { randomUUID } from "node:crypto";
import { domainToASCII } from "node:url";
import nodemailer, { type Mail, type SMTPPoolOptions, type SMTPPoolSentMessageInfo } from "nodemailer";
import type { Logger } from "../log.js";
import type { EmailProvider, OutgoingEmail, SentEmail } from "./email-provider.js";
import { isEmailAddress, mailboxAddress } from "../net/email-address.js";
import { DeliveryError } from "./provider.js";

export interface SmtpOptions {
  /** Longest wait of `send`, connection and greeting included; also the socket inactivity limit. */
  timeoutMs: number;
  /** Where transport-level trouble is reported (never message contents). */
  log?: Logger;
  /** Open connections of the pool; default 5. */
  maxConnections?: number;
}

/** Parts of SMTP_URL (`smtp://user:password@host:587` or `smtps://user:password@host:465`). */
export interface SmtpTarget {
  host: string;
  port: number;
  /** TLS from the first byte (smtps); otherwise STARTTLS whenever the server offers it. */
  secure: boolean;
  /** Absent when the URL names no user: the server relays without AUTH. */
  auth?: { user: string; pass: string };
}

/** Errors without an SMTP reply that the same message would meet again: settings, the message itself. */
const FINAL_CODES = new Set([
  "ECONFIG",
  "ENOAUTH",
  "EAUTH",
  "EENVELOPE",
  "EMESSAGE",
  "EMAXRECIPIENTS",
  "EREQUIRETLS",
  "EFILEACCESS",
  "EURLACCESS",
]);
/** Errors of reaching the server at all. */
const NETWORK_CODES = new Set(["ECONNECTION", "ESOCKET", "EDNS", "ETLS", "EPROXY"]);

/**
 * Sends through an SMTP server (submission or relay) over a pool of kept-alive connections, as
 * text/plain UTF-8. The Message-ID is built from our reference and the sender's domain; the id
 * answered is the one the server says it gave the message (Microsoft 365, Amazon SES rewrite it),
 * else that Message-ID. Refusals become DeliveryErrors naming the reply code and command, never
 * the server's text (which may quote the message): 4xx are worth retrying, 5xx are not.
 */
export class SmtpEmailProvider implements EmailProvider {
  readonly name = "smtp";
  private readonly timeoutMs: number;
  private readonly transport: ReturnType<typeof createPool>;
  private readonly inFlight = new Set<Promise<unknown>>();
  private closed = false;

  constructor(smtpUrl: string, options: SmtpOptions) {
    const target = parseSmtpUrl(smtpUrl);
    this.timeoutMs = options.timeoutMs;
    this.transport = createPool(target, options);
    const log = options.log;
    this.transport.on("error", (err: unknown) => {
      log?.error("SMTP transport error", { provider: "smtp", error: errorCodeOf(err) ?? "unknown" });
    });
  }

  async send(msg: OutgoingEmail): Promise<SentEmail> {
    if (this.closed) throw new DeliveryError("SMTP email provider closed");
    const { to, from, subject, body, reference } = msg;
    if (!isEmailAddress(to)) throw new DeliveryError("the recipient is not an email address", false);
    const sender = mailboxAddress(from);
    if (sender === undefined) throw new DeliveryError("the sender is not an email address", false);
    const sending = this.transport.sendMail({
      from,
      to,
      subject,
      text: body,
      messageId: messageIdOf(reference, sender),
      // RFC 3834: no vacation replies or other auto-answers to a code.
      headers: { "Auto-Submitted": "auto-generated" },
      signal: AbortSignal.timeout(this.timeoutMs),
      disableFileAccess: true,
      disableUrlAccess: true,
    });
    this.inFlight.add(sending);
    try {
      const info = await sending;
      return { providerId: info.serverMessageId ?? info.messageId };
    } catch (err) {
      throw smtpFailure(err, this.timeoutMs);
    } finally {
      this.inFlight.delete(sending);
    }
  }

  /** Refuses new messages, lets those under way finish (each within its timeout), then closes the pool. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.allSettled([...this.inFlight]);
    this.transport.close();
  }
}

function createPool(
  target: SmtpTarget,
  options: SmtpOptions,
): Mail<SMTPPoolSentMessageInfo, SMTPPoolOptions> {
  const { timeoutMs } = options;
  const settings: SMTPPoolOptions & { pool: true } = {
    pool: true,
    maxConnections: options.maxConnections ?? 5,
    host: target.host,
    port: target.port,
    secure: target.secure,
    ...(target.auth === undefined ? {} : { auth: target.auth }),
    connectionTimeout: timeoutMs,
    greetingTimeout: timeoutMs,
    socketTimeout: timeoutMs,
    dnsTimeout: timeoutMs,
    // Message data passes through the logger in debug mode: never turn it on, codes are in there.
    logger: false,
    debug: false,
    transactionLog: false,
    disableFileAccess: true,
    disableUrlAccess: true,
  };
  return nodemailer.createTransport(settings);
}

/**
 * SMTP_URL's parts; throws an Error naming the variable (never echoing the password) when it is
 * not an smtp:// or smtps:// URL with a host. The port defaults to 587 (smtp) or 465 (smtps).
 */
export function parseSmtpUrl(url: string): SmtpTarget {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new Error("SMTP_URL must be a URL such as smtp://user:password@host:587");
  }
  if (u.protocol !== "smtp:" && u.protocol !== "smtps:") {
    throw new Error(`SMTP_URL must start with smtp:// or smtps:// (got ${u.protocol}//)`);
  }
  if (u.hostname === "") throw new Error("SMTP_URL must name the host: smtp://user:password@host:587");
  const secure = u.protocol === "smtps:";
  const user = decodeURIComponent(u.username);
  return {
    host: u.hostname.replace(/^\[(.*)\]$/, "$1"),
    port: u.port === "" ? (secure ? 465 : 587) : Number(u.port),
    secure,
    ...(user === "" ? {} : { auth: { user, pass: decodeURIComponent(u.password) } }),
  };
}

/** `<reference@sender-domain>`, the reference kept to the characters a Message-ID's left part allows. */
function messageIdOf(reference: string, senderAddress: string): string {
  const left = reference.replace(/[^A-Za-z0-9!#$%&'*+/=?^_`{|}~.-]/g, "-").replace(/^\.+|\.+$/g, "");
  const domain = domainToASCII(senderAddress.slice(senderAddress.lastIndexOf("@") + 1));
  return `<${left === "" ? randomUUID() : left}@${domain === "" ? "localhost" : domain}>`;
}

interface SmtpErrorFields {
  name?: unknown;
  code?: unknown;
  originalCode?: unknown;
  responseCode?: unknown;
  response?: unknown;
  command?: unknown;
}

function errorCodeOf(err: unknown): string | undefined {
  const code = typeof err === "object" && err !== null ? (err as SmtpErrorFields).code : undefined;
  return typeof code === "string" ? code : undefined;
}

/** A nodemailer failure as a DeliveryError whose message holds codes only, never the server's text. */
function smtpFailure(err: unknown, timeoutMs: number): DeliveryError {
  const e: SmtpErrorFields = typeof err === "object" && err !== null ? err : {};
  const code = typeof e.code === "string" ? e.code : undefined;
  if (code === "EABORT" || code === "ETIMEDOUT" || e.name === "AbortError" || e.name === "TimeoutError") {
    return new DeliveryError(`SMTP email provider did not answer within ${timeoutMs} ms`, true);
  }
  if (typeof e.responseCode === "number") {
    const reply = e.responseCode;
    const enhanced =
      typeof e.response === "string"
        ? /^\d{3}[ -]([245]\.\d{1,3}\.\d{1,3})\b/.exec(e.response)?.[1]
        : undefined;
    const command =
      typeof e.command === "string" &&
      /^(MAIL FROM|RCPT TO|DATA|AUTH [A-Z0-9-]+|EHLO|HELO|STARTTLS)$/.test(e.command)
        ? ` to ${e.command}`
        : "";
    // RFC 5321: 5yz refuses for good, 4yz for now; 503 is a session out of step, not a refusal.
    const permanent = reply >= 500 && reply < 600 && reply !== 503;
    return new DeliveryError(
      `SMTP email provider answered ${reply}${enhanced === undefined ? "" : ` ${enhanced}`}${command}`,
      !permanent,
    );
  }
  if (code !== undefined && NETWORK_CODES.has(code)) {
    const original = typeof e.originalCode === "string" ? e.originalCode : code;
    return new DeliveryError(`SMTP email provider unreachable: ${original}`, true);
  }
  if (code !== undefined && FINAL_CODES.has(code)) {
    return new DeliveryError(`SMTP email provider refused the message: ${code}`, false);
  }
  return new DeliveryError(`SMTP email provider failed: ${code ?? "unknown error"}`, true);
}
