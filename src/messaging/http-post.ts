import { z } from "zod";
import { DeliveryError } from "./provider.js";

/** The optional part of a provider's answer that we use: its own id of the message. */
const Answer = z.object({ id: z.string().min(1).max(256) });

/**
 * POSTs a message as JSON to an HTTP provider (docs/decisions.md#8-message-delivery-providers): any 2xx means accepted and
 * gives the provider's `id` when its answer has one. Failures are DeliveryErrors whose message
 * names the status or network error, never the message. Redirects are refused, so a message
 * holding a code cannot be forwarded to another host.
 */
export async function postToProvider(
  label: string,
  url: string,
  payload: Record<string, string>,
  timeoutMs: number,
): Promise<string | undefined> {
  let res: Response;
  try {
    res = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json" },
      body: JSON.stringify(payload),
      signal: AbortSignal.timeout(timeoutMs),
      redirect: "error",
    });
  } catch (err) {
    throw failure(label, timeoutMs, err);
  }
  if (res.status < 200 || res.status > 299) {
    await res.body?.cancel().catch(() => undefined);
    // 4xx says the message itself was refused; 408, 429 and 5xx may pass later.
    const retryable = res.status >= 500 || res.status === 408 || res.status === 429;
    throw new DeliveryError(`${label} answered ${res.status}`, retryable);
  }
  // Accepted whatever follows: an answer that cannot be read only loses the provider's id.
  const text = await res.text().catch(() => "");
  try {
    const parsed = Answer.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data.id : undefined;
  } catch {
    return undefined;
  }
}

function failure(label: string, timeoutMs: number, err: unknown): DeliveryError {
  if (err instanceof Error && (err.name === "TimeoutError" || err.name === "AbortError")) {
    return new DeliveryError(`${label} did not answer within ${timeoutMs} ms`, true, {
      outcomeUnknown: true,
    });
  }
  // fetch hides the reason in `cause` (ECONNREFUSED, ENOTFOUND, ...).
  const cause = err instanceof Error ? err.cause : undefined;
  const code =
    cause instanceof Error && "code" in cause && typeof cause.code === "string"
      ? cause.code
      : "network error";
  // Refused or unresolved: nothing reached the provider. Anything else may have, after the request.
  const neverSent =
    /^(ECONNREFUSED|ENOTFOUND|EAI_AGAIN|EHOSTUNREACH|ENETUNREACH|UND_ERR_CONNECT_TIMEOUT)$/.test(code);
  return new DeliveryError(`${label} unreachable: ${code}`, true, { outcomeUnknown: !neverSent });
}
