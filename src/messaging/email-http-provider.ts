import { z } from "zod";
import type { EmailProvider, OutgoingEmail, SentEmail } from "./email-provider.js";
import { isEmailAddress } from "./email-provider.js";
import { DeliveryError } from "./provider.js";

/** The optional part of a provider's answer that we use: its own id of the message. */
const Answer = z.object({ id: z.string().min(1).max(256) });

/**
 * POSTs each email as JSON `{to, from, subject, body, reference}` (decisions section 3); any 2xx
 * answer means accepted.
 */
export class HttpEmailProvider implements EmailProvider {
  readonly name = "http";
  private readonly timeoutMs: number;

  constructor(
    private readonly url: string,
    options: { timeoutMs: number },
  ) {
    this.timeoutMs = options.timeoutMs;
  }

  async send(msg: OutgoingEmail): Promise<SentEmail> {
    const { to, from, subject, body, reference } = msg;
    if (!isEmailAddress(to)) throw new DeliveryError("the recipient is not an email address", false);
    let res: Response;
    try {
      res = await fetch(this.url, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json" },
        body: JSON.stringify({ to, from, subject, body, reference }),
        signal: AbortSignal.timeout(this.timeoutMs),
        redirect: "error",
      });
    } catch (err) {
      throw this.failure(err);
    }
    if (res.status < 200 || res.status > 299) {
      await res.body?.cancel().catch(() => undefined);
      // 4xx says the message itself was refused; 408, 429 and 5xx may pass later.
      const retryable = res.status >= 500 || res.status === 408 || res.status === 429;
      throw new DeliveryError(`HTTP email provider answered ${res.status}`, retryable);
    }
    // Accepted whatever follows: an answer that cannot be read only loses the provider's id.
    const text = await res.text().catch(() => "");
    return { providerId: providerIdOf(text) ?? reference };
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  private failure(err: unknown): DeliveryError {
    if (err instanceof Error && (err.name === "TimeoutError" || err.name === "AbortError")) {
      return new DeliveryError(`HTTP email provider did not answer within ${this.timeoutMs} ms`, true);
    }
    // fetch hides the reason in `cause` (ECONNREFUSED, ENOTFOUND, ...).
    const cause = err instanceof Error ? err.cause : undefined;
    const code =
      cause instanceof Error && "code" in cause && typeof cause.code === "string"
        ? cause.code
        : "network error";
    return new DeliveryError(`HTTP email provider unreachable: ${code}`, true);
  }
}

function providerIdOf(text: string): string | undefined {
  try {
    const parsed = Answer.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data.id : undefined;
  } catch {
    return undefined;
  }
}
