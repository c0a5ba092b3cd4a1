import type { DeliveryReceipt, OutgoingSms, SentSms, SmsProvider } from "./provider.js";
import { postToProvider } from "./http-post.js";

/**
 * POSTs each message as JSON `{to, from, body, locale, reference}` (docs/decisions.md#8-message-delivery-providers); any 2xx
 * answer means accepted. Its delivery reports arrive at `POST /v1/delivery/status/{provider}`, naming
 * our `reference` (src/delivery/reports.ts), not through `onReceipt`.
 */
export class HttpSmsProvider implements SmsProvider {
  readonly name: string;
  readonly longestSendMs: number;

  constructor(
    private readonly url: string,
    private readonly options: { timeoutMs: number; name?: string },
  ) {
    this.name = options.name ?? "http";
    this.longestSendMs = options.timeoutMs;
  }

  async send(msg: OutgoingSms): Promise<SentSms> {
    const { to, from, body, locale, reference } = msg;
    await postToProvider(
      "HTTP SMS provider",
      this.url,
      { to, from, body, locale, reference },
      this.options.timeoutMs,
    );
    // Its delivery reports name our reference (docs/routing.md#delivery-reports), so that is the id kept.
    return { providerId: reference };
  }

  onReceipt(_listener: (r: DeliveryReceipt) => void): void {
    // This provider reports acceptance only.
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
