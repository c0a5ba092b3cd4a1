import type { Logger } from "../log.js";
import type { CallScope } from "../observability/calls.js";
import type { EmailProvider, OutgoingEmail, SentEmail } from "./email-provider.js";

/**
 * Development only: writes each email, code included, to the log instead of sending it (the one
 * place where a code may be logged, docs/decisions.md#9-codes-never-logged-or-stored).
 */
export class LogEmailProvider implements EmailProvider {
  readonly name = "log";

  constructor(private readonly log: Logger) {
    log.warn("EMAIL_PROVIDER=log: emails are written to the log, codes included, and never sent");
  }

  send(msg: OutgoingEmail, call?: CallScope): Promise<SentEmail> {
    const { to, from, subject, body, reference } = msg;
    (call?.log ?? this.log).warn("email (log provider)", { to, from, subject, body, reference });
    return Promise.resolve({ providerId: reference });
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
