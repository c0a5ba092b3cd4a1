import type { DeliveryReceipt, OutgoingSms, SentSms, SmsProvider } from "./provider.js";
import { postToProvider } from "./http-post.js";

/**
 * A voice provider (docs/routing.md#providers): POSTs each call to make as JSON `{to, from, text,
 * locale, reference}`, `text` being what the call says (the message's `body`, the code digit by
 * digit as the engine wrote it); any 2xx answer means accepted. Its delivery reports arrive at
 * `POST /v1/delivery/status/{provider}` naming our `reference`, as an http SMS provider's do.
 */
export class VoiceProvider implements SmsProvider {
  readonly name: string;
  readonly longestSendMs: number;

  constructor(
    private readonly url: string,
    private readonly options: { timeoutMs: number; name: string },
  ) {
    this.name = options.name;
    this.longestSendMs = options.timeoutMs;
  }

  async send(msg: OutgoingSms): Promise<SentSms> {
    const { to, from, body, locale, reference } = msg;
    await postToProvider(
      "voice provider",
      this.url,
      { to, from, text: body, locale, reference },
      this.options.timeoutMs,
    );
    // Its delivery reports name our reference (docs/routing.md#delivery-reports), so that is the id kept.
    return { providerId: reference };
  }

  onReceipt(_listener: (r: DeliveryReceipt) => void): void {
    // Its reports come as http reports, naming our reference.
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
