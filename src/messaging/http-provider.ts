import type { DeliveryReceipt, OutgoingSms, SentSms, SmsProvider } from "./provider.js";
import { postToProvider } from "./http-post.js";

/**
 * POSTs each message as JSON `{to, from, body, locale, reference}` (docs/decisions.md#8-message-delivery-providers); any 2xx
 * answer means accepted. The provider has no receipt channel here, so no receipts.
 */
export class HttpSmsProvider implements SmsProvider {
  readonly name = "http";
  readonly longestSendMs: number;

  constructor(
    private readonly url: string,
    private readonly options: { timeoutMs: number },
  ) {
    this.longestSendMs = options.timeoutMs;
  }

  async send(msg: OutgoingSms): Promise<SentSms> {
    const { to, from, body, locale, reference } = msg;
    const id = await postToProvider(
      "HTTP SMS provider",
      this.url,
      { to, from, body, locale, reference },
      this.options.timeoutMs,
    );
    return { providerId: id ?? reference };
  }

  onReceipt(_listener: (r: DeliveryReceipt) => void): void {
    // This provider reports acceptance only.
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
