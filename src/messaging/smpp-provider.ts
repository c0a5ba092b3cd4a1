import smpp from "smpp";
import type { Logger } from "../log.js";
import { smsEncoding } from "./gsm7.js";
import type { DeliveryReceipt, DeliveryState, OutgoingSms, SentSms, SmsProvider } from "./provider.js";
import { DeliveryError, ReceiptListeners } from "./provider.js";

export interface SmppOptions {
  log: Logger;
  /** Its name in metrics, logs and routes; default `smpp`. */
  name?: string;
  /** Keep-alive period; a link that leaves an enquire_link unanswered for a whole period is dropped. */
  enquireLinkMs?: number;
  /** Longest wait of `send`, bind included, for the submit_sm_resp; also the bind timeout. */
  submitTimeoutMs?: number;
  /** Reconnection backoff: first delay, doubled after each failure up to the maximum. */
  reconnectMinMs?: number;
  reconnectMaxMs?: number;
}

/** Parts of SMPP_URL (`smpp://system_id:password@host:port`). */
export interface SmppTarget {
  host: string;
  port: number;
  systemId: string;
  password: string;
}

/** SMPP 3.4: the version whose receipts (`receipted_message_id`, `id:... stat:...`) SMSCs speak. */
const INTERFACE_VERSION = 0x34;
/** esm_class message type "SMSC delivery receipt". */
const ESM_CLASS_RECEIPT = 0x04;
/** Octets a short_message may hold in one SMS; longer texts go in message_payload for the SMSC to split. */
const SHORT_MESSAGE_OCTETS = 140;

/** Receipt status words (SMPP 3.4 appendix B) to our states. */
const STATES: Readonly<Record<string, DeliveryState>> = {
  DELIVRD: "delivered",
  UNDELIV: "failed",
  EXPIRED: "expired",
  REJECTD: "rejected",
  ACCEPTD: "accepted",
};
/** The `message_state` TLV, for receipts that carry no text. */
const MESSAGE_STATES: Readonly<Record<number, string>> = {
  1: "ENROUTE",
  2: "DELIVRD",
  3: "EXPIRED",
  4: "DELETED",
  5: "UNDELIV",
  6: "ACCEPTD",
  7: "UNKNOWN",
  8: "REJECTD",
};
/** submit_sm refusals that may pass later: throttling, full queue, SMSC trouble. */
const RETRYABLE_STATUSES = new Set(["ESME_RTHROTTLED", "ESME_RMSGQFUL", "ESME_RSYSERR", "ESME_RUNKNOWNERR"]);
/** Bind refusals that no retry can fix. */
const FINAL_BIND_STATUSES = new Set(["ESME_RINVPASWD", "ESME_RINVSYSID"]);

interface Link {
  session: smpp.Session;
  bound: boolean;
  /** Rejecters of the submits waiting for their submit_sm_resp on this link. */
  inFlight: Set<(err: DeliveryError) => void>;
  keepAlive?: NodeJS.Timeout;
  awaitingEnquireResp: boolean;
}

interface Waiter {
  resolve(link: Link): void;
  reject(err: DeliveryError): void;
}

/**
 * An SMPP client (ESME) bound as transceiver: submits messages and turns delivery receipts into
 * DeliveryReceipt events. It connects at construction and reconnects with backoff whenever the
 * link drops; `send` waits for the bind (within `submitTimeoutMs`) except after the SMSC refused
 * our credentials, when it fails at once.
 */
export class SmppSmsProvider implements SmsProvider {
  readonly name: string;
  private readonly target: SmppTarget;
  private readonly log: Logger;
  private readonly enquireLinkMs: number;
  private readonly submitTimeoutMs: number;
  /** A send waits for the bind and the SMSC's answer within submitTimeoutMs in all. */
  readonly longestSendMs: number;
  private readonly reconnectMinMs: number;
  private readonly reconnectMaxMs: number;
  private readonly receipts: ReceiptListeners;
  private readonly waiters = new Set<Waiter>();
  private state: "connecting" | "bound" | "down" | "closed" = "connecting";
  private link: Link | undefined;
  /** The SMSC's refusal of our bind, until a bind succeeds. */
  private refusal: DeliveryError | undefined;
  private lastProblem = "not connected yet";
  private backoffMs: number;
  private reconnectTimer: NodeJS.Timeout | undefined;

  constructor(url: string, options: SmppOptions) {
    this.target = parseSmppUrl(url);
    this.name = options.name ?? "smpp";
    this.log = options.log;
    this.enquireLinkMs = options.enquireLinkMs ?? 30_000;
    this.submitTimeoutMs = options.submitTimeoutMs ?? 10_000;
    this.longestSendMs = this.submitTimeoutMs;
    this.reconnectMinMs = options.reconnectMinMs ?? 1_000;
    this.reconnectMaxMs = options.reconnectMaxMs ?? 30_000;
    this.backoffMs = this.reconnectMinMs;
    this.receipts = new ReceiptListeners((err) => {
      this.log.error("delivery receipt listener failed", { provider: this.name, error: String(err) });
    });
    this.connect();
  }

  async send(msg: OutgoingSms): Promise<SentSms> {
    const started = Date.now();
    const link = await this.boundLink(this.submitTimeoutMs);
    return this.submit(link, msg, Math.max(1, this.submitTimeoutMs - (Date.now() - started)));
  }

  onReceipt(listener: (r: DeliveryReceipt) => void): void {
    this.receipts.add(listener);
  }

  /** False while the bind is down or refused: a route skips it at once (docs/routing.md#availability). */
  available(): boolean {
    return this.state !== "down" && this.state !== "closed";
  }

  /** Unbinds (waiting up to 2 s for unbind_resp), closes the link and stops reconnecting. */
  async close(): Promise<void> {
    if (this.state === "closed") return;
    this.state = "closed";
    clearTimeout(this.reconnectTimer);
    for (const waiter of [...this.waiters]) waiter.reject(new DeliveryError("SMPP provider closed"));
    const link = this.link;
    if (link === undefined) return;
    const { session } = link;
    if (link.bound) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 2_000);
        const sent = session.unbind({}, () => {
          clearTimeout(timer);
          resolve();
        });
        if (!sent) {
          clearTimeout(timer);
          resolve();
        }
      });
    }
    await new Promise<void>((resolve) => {
      if (session.socket.destroyed) resolve();
      else session.destroy(resolve);
    });
  }

  private boundLink(timeoutMs: number): Promise<Link> {
    if (this.state === "closed") return Promise.reject(new DeliveryError("SMPP provider closed"));
    if (this.link?.bound === true) return Promise.resolve(this.link);
    if (this.state === "down" && this.refusal !== undefined) return Promise.reject(this.refusal);
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        resolve: (link) => {
          clearTimeout(timer);
          this.waiters.delete(waiter);
          resolve(link);
        },
        reject: (err) => {
          clearTimeout(timer);
          this.waiters.delete(waiter);
          reject(err);
        },
      };
      const timer = setTimeout(() => {
        waiter.reject(new DeliveryError(`SMPP not bound within ${timeoutMs} ms (${this.lastProblem})`));
      }, timeoutMs);
      this.waiters.add(waiter);
    });
  }

  private submit(link: Link, msg: OutgoingSms, timeoutMs: number): Promise<SentSms> {
    return new Promise((resolve, reject) => {
      let settled = false;
      const settle = (finish: () => void) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        link.inFlight.delete(fail);
        finish();
      };
      const fail = (err: DeliveryError) => {
        settle(() => {
          reject(err);
        });
      };
      const timer = setTimeout(() => {
        fail(
          new DeliveryError(`SMPP: no submit_sm_resp within ${timeoutMs} ms`, true, { outcomeUnknown: true }),
        );
      }, timeoutMs);
      link.inFlight.add(fail);
      try {
        const written = link.session.submit_sm(submitFields(msg), (resp) => {
          if (resp.command_status === 0) {
            const providerId =
              resp.message_id !== undefined && resp.message_id !== "" ? resp.message_id : msg.reference;
            settle(() => {
              resolve({ providerId });
            });
          } else {
            const status = statusName(resp.command_status);
            fail(
              new DeliveryError(
                `SMPP submit_sm refused: ${status}`,
                RETRYABLE_STATUSES.has(status.split(" ")[0] ?? ""),
              ),
            );
          }
        });
        if (!written) fail(new DeliveryError("SMPP: connection lost before submit_sm"));
      } catch (err) {
        // The library refuses to encode (a field too long for its PDU): the message itself is wrong.
        fail(
          new DeliveryError(
            `SMPP: submit_sm not encodable (${err instanceof Error ? err.message : "?"})`,
            false,
          ),
        );
      }
    });
  }

  private connect(): void {
    this.reconnectTimer = undefined;
    if (this.state === "closed") return;
    this.state = "connecting";
    const { host, port, systemId, password } = this.target;
    const session = smpp.connect({ host, port });
    // One small PDU answers another: Nagle's algorithm would hold each back for a delayed ACK.
    session.socket.setNoDelay(true);
    const link: Link = { session, bound: false, inFlight: new Set(), awaitingEnquireResp: false };
    this.link = link;
    const bindTimer = setTimeout(() => {
      this.lastProblem = `no bind_transceiver_resp within ${this.submitTimeoutMs} ms`;
      session.destroy();
    }, this.submitTimeoutMs);

    session.on("connect", () => {
      session.bind_transceiver(
        { system_id: systemId, password, interface_version: INTERFACE_VERSION },
        (resp) => {
          clearTimeout(bindTimer);
          if (resp.command_status === 0) this.onBound(link);
          else this.onBindRefused(link, resp.command_status);
        },
      );
    });
    session.on("error", (err) => {
      // The library also emits parse errors here, after which the link reads nothing more.
      this.lastProblem = errorText(err);
      this.log.warn("smpp connection error", { provider: this.name, host, port, error: this.lastProblem });
      session.destroy();
    });
    session.on("close", () => {
      clearTimeout(bindTimer);
      this.onClose(link);
    });
    session.on("enquire_link", (pdu) => {
      session.send(pdu.response());
    });
    session.on("unbind", (pdu) => {
      this.lastProblem = "the SMSC unbound";
      session.send(pdu.response(), () => {
        session.destroy();
      });
    });
    session.on("deliver_sm", (pdu) => {
      session.send(pdu.response());
      this.onDeliverSm(pdu);
    });
    session.on("unknown", (pdu) => {
      session.send(pdu.response());
    });
  }

  private onBound(link: Link): void {
    if (this.link !== link || this.state === "closed") return;
    link.bound = true;
    this.state = "bound";
    this.refusal = undefined;
    this.backoffMs = this.reconnectMinMs;
    const { host, port, systemId } = this.target;
    this.log.info("smpp bound", { provider: this.name, host, port, system_id: systemId });
    link.keepAlive = setInterval(() => {
      this.keepAlive(link);
    }, this.enquireLinkMs);
    for (const waiter of [...this.waiters]) waiter.resolve(link);
  }

  private onBindRefused(link: Link, status: number): void {
    const name = statusName(status);
    this.refusal = new DeliveryError(
      `SMPP bind refused: ${name}`,
      !FINAL_BIND_STATUSES.has(name.split(" ")[0] ?? ""),
    );
    this.lastProblem = this.refusal.message;
    const { host, port, systemId } = this.target;
    this.log.error("smpp bind refused", {
      provider: this.name,
      host,
      port,
      system_id: systemId,
      status: name,
    });
    for (const waiter of [...this.waiters]) waiter.reject(this.refusal);
    link.session.destroy();
  }

  private onClose(link: Link): void {
    clearInterval(link.keepAlive);
    const wasBound = link.bound;
    link.bound = false;
    for (const fail of [...link.inFlight])
      fail(new DeliveryError("SMPP: connection lost before submit_sm_resp", true, { outcomeUnknown: true }));
    if (this.link !== link) return;
    this.link = undefined;
    if (this.state === "closed") return;
    this.state = "down";
    const delay = Math.round(this.backoffMs * (0.8 + Math.random() * 0.4));
    this.backoffMs = Math.min(this.backoffMs * 2, this.reconnectMaxMs);
    const { host, port } = this.target;
    this.log[wasBound ? "warn" : "debug"]("smpp link down, reconnecting", {
      provider: this.name,
      host,
      port,
      reason: this.lastProblem,
      retry_in_ms: delay,
    });
    this.reconnectTimer = setTimeout(() => {
      this.connect();
    }, delay);
  }

  private keepAlive(link: Link): void {
    if (link.awaitingEnquireResp) {
      this.lastProblem = `enquire_link unanswered for ${this.enquireLinkMs} ms`;
      link.session.destroy();
      return;
    }
    link.awaitingEnquireResp = true;
    link.session.enquire_link({}, () => {
      link.awaitingEnquireResp = false;
    });
  }

  private onDeliverSm(pdu: smpp.PDU): void {
    const receipt = parseReceipt(pdu);
    if (receipt === undefined) {
      this.log.debug("smpp deliver_sm that is not a delivery receipt, ignored", { provider: this.name });
      return;
    }
    this.receipts.emit(receipt);
  }
}

/** `smpp://system_id:password@host:port` (port 2775 when left out); throws an Error naming what is wrong. */
export function parseSmppUrl(url: string): SmppTarget {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new Error("SMPP_URL must be a URL such as smpp://system_id:password@host:2775");
  }
  if (u.protocol !== "smpp:") throw new Error(`SMPP_URL must start with smpp:// (got ${u.protocol}//)`);
  const systemId = decodeURIComponent(u.username);
  if (systemId === "" || u.hostname === "") {
    throw new Error("SMPP_URL must name the system_id and the host: smpp://system_id:password@host:2775");
  }
  return {
    host: u.hostname.replace(/^\[(.*)\]$/, "$1"),
    port: u.port === "" ? 2775 : Number(u.port),
    systemId,
    password: decodeURIComponent(u.password),
  };
}

/** submit_sm fields: addresses by the TON/NPI of their shape, GSM-7 or UCS2, a receipt requested. */
function submitFields(msg: OutgoingSms): Record<string, unknown> {
  const numericSender = /^\+?\d+$/.test(msg.from);
  const { encoding, units } = smsEncoding(msg.body);
  const octets = encoding === "gsm7" ? units : units * 2;
  return {
    // Alphanumeric sender: TON 5 (alphanumeric), NPI 0; a number: TON 1 (international), NPI 1 (E.164).
    source_addr_ton: numericSender ? 1 : 5,
    source_addr_npi: numericSender ? 1 : 0,
    source_addr: numericSender ? msg.from.replace(/^\+/, "") : msg.from,
    dest_addr_ton: 1,
    dest_addr_npi: 1,
    destination_addr: msg.to.replace(/^\+/, ""),
    registered_delivery: 1,
    // 0: the SMSC default alphabet (GSM 03.38), which the library encodes; 8: UCS2 (UTF-16BE).
    data_coding: encoding === "gsm7" ? 0 : 8,
    ...(octets <= SHORT_MESSAGE_OCTETS ? { short_message: msg.body } : { message_payload: msg.body }),
  };
}

/** A DeliveryReceipt from a deliver_sm, or undefined when it is not one (an incoming message). */
export function parseReceipt(pdu: smpp.PDU, now: Date = new Date()): DeliveryReceipt | undefined {
  const text = textOf(pdu.short_message) || textOf(pdu.message_payload);
  const isReceipt =
    ((pdu.esm_class ?? 0) & ESM_CLASS_RECEIPT) !== 0 ||
    pdu.receipted_message_id !== undefined ||
    /(?:^|\s)id:\S+.*\sstat:\S+/is.test(text);
  if (!isReceipt) return undefined;
  const field = (name: string) => new RegExp(`(?:^|\\s)${name}:(\\S+)`, "i").exec(text)?.[1];
  const tlvId = pdu.receipted_message_id?.trim();
  const providerId = tlvId !== undefined && tlvId !== "" ? tlvId : field("id");
  if (providerId === undefined) return undefined;
  const providerStatus =
    field("stat")?.toUpperCase() ??
    (pdu.message_state === undefined ? undefined : MESSAGE_STATES[pdu.message_state]) ??
    "UNKNOWN";
  const errorCode = field("err") ?? networkErrorCode(pdu.network_error_code);
  return {
    providerId,
    state: STATES[providerStatus] ?? "unknown",
    providerStatus,
    ...(errorCode !== undefined && !/^0+$/.test(errorCode) ? { errorCode } : {}),
    at: now.toISOString(),
  };
}

function textOf(field: smpp.MessageField | undefined): string {
  if (field === undefined) return "";
  if (typeof field === "string") return field;
  if (Buffer.isBuffer(field)) return field.toString("latin1");
  return typeof field.message === "string" ? field.message : field.message.toString("latin1");
}

/** network_error_code TLV: network type (1 octet) and error code (2 octets). */
function networkErrorCode(value: Buffer | undefined): string | undefined {
  return value?.length === 3 ? String(value.readUInt16BE(1)) : undefined;
}

/** `ESME_RINVPASWD (0x0000000E)` for a command_status. */
function statusName(status: number): string {
  const hex = `0x${status.toString(16).toUpperCase().padStart(8, "0")}`;
  const name = Object.entries(smpp.errors).find(([, value]) => value === status)?.[0];
  return name === undefined ? hex : `${name} (${hex})`;
}

function errorText(err: Error): string {
  return "code" in err && typeof err.code === "string" ? err.code : err.message;
}
