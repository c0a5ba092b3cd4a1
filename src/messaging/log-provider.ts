import type { Logger } from "../log.js";
import type { CallScope } from "../observability/calls.js";
import type { DeliveryReceipt, OutgoingSms, SentSms, SmsProvider } from "./provider.js";

/**
 * Development only: writes each message, code included, to the log instead of sending it (the one
 * place where a code may be logged, docs/decisions.md#9-codes-never-logged-or-stored). Nothing is delivered, so no receipts.
 */
export class LogSmsProvider implements SmsProvider {
  readonly name: string;
  /** Writing a log line takes no time worth holding a charge for. */
  readonly longestSendMs = 0;

  constructor(
    private readonly log: Logger,
    name = "log",
  ) {
    this.name = name;
    log.warn("SMS_PROVIDER=log: messages are written to the log, codes included, and never sent");
  }

  send(msg: OutgoingSms, call?: CallScope): Promise<SentSms> {
    const { to, from, body, locale, reference } = msg;
    (call?.log ?? this.log).warn("sms (log provider)", { to, from, body, locale, reference });
    return Promise.resolve({ providerId: reference });
  }

  onReceipt(_listener: (r: DeliveryReceipt) => void): void {
    // Nothing is sent, so nothing is ever delivered.
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
