import type { EmailProvider, OutgoingEmail, SentEmail } from "./email-provider.js";
import { isEmailAddress } from "../net/email-address.js";
import { DeliveryError } from "./provider.js";
import { postToProvider } from "./http-post.js";

/**
 * POSTs each email as JSON `{to, from, subject, body, reference}` (docs/decisions.md#8-message-delivery-providers); any 2xx
 * answer means accepted.
 */
export class HttpEmailProvider implements EmailProvider {
  readonly name = "http";

  constructor(
    private readonly url: string,
    private readonly options: { timeoutMs: number },
  ) {}

  async send(msg: OutgoingEmail): Promise<SentEmail> {
    const { to, from, subject, body, reference } = msg;
    if (!isEmailAddress(to)) throw new DeliveryError("the recipient is not an email address", false);
    const payload = { to, from, subject, body, reference };
    const id = await postToProvider("HTTP email provider", this.url, payload, this.options.timeoutMs);
    return { providerId: id ?? reference };
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
