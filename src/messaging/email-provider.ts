import type { CallScope } from "../observability/calls.js";
/** One email to send. `body` holds the code: it is never logged outside the log provider. */
export interface OutgoingEmail {
  /** Destination address (`isEmailAddress`). */
  to: string;
  /** Sender: an address, or `Display Name <address>` (`isMailbox`). */
  from: string;
  /** Never holds the code. */
  subject: string;
  /** Plain text. */
  body: string;
  /** Our id of this message, unique per message. */
  reference: string;
}

export interface SentEmail {
  /** The id the provider gave (the SMTP Message-ID, the HTTP answer's `id`), or our reference. */
  providerId: string;
}

export interface EmailProvider {
  readonly name: "log" | "http" | "smtp";
  /**
   * Resolves once the provider has accepted the message; rejects with a DeliveryError otherwise.
   * `call` is the call it is sent for: its deadline, its log.
   */
  send(msg: OutgoingEmail, call?: CallScope): Promise<SentEmail>;
  close(): Promise<void>;
}
