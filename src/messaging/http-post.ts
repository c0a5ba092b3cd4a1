import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import { z } from "zod";
import { DeliveryError } from "./provider.js";

/** The optional part of a provider's answer that we use: its own id of the message. */
const Answer = z.object({ id: z.string().min(1).max(256) });

/** An answer's body is read up to this many bytes; a longer one only loses the provider's id. */
const ANSWER_BYTES_MAX = 64 * 1024;

/**
 * Connections to providers are kept open between messages, one pool per protocol: a send reuses a
 * warm connection (no TCP or TLS handshake) instead of opening its own. One idle for 4 s is closed
 * by us, before a server's own idle limit (5 s is common, Node's default) can close it under a
 * message just written to it, which would leave that message's outcome unknown.
 */
const IDLE_MS = 4_000;
const agents = {
  "http:": new HttpAgent({ keepAlive: true, timeout: IDLE_MS }),
  "https:": new HttpsAgent({ keepAlive: true, timeout: IDLE_MS }),
};

/** Errors that say the request never reached the provider: a refusal for sure. */
const NEVER_SENT = /^(ECONNREFUSED|ENOTFOUND|EAI_AGAIN|EHOSTUNREACH|ENETUNREACH)$/;

/**
 * POSTs a message as JSON to an HTTP provider (docs/decisions.md#8-message-delivery-providers): any
 * 2xx means accepted and gives the provider's `id` when its answer has one. Failures are
 * DeliveryErrors whose message names the status or network error, never the message. Redirects are
 * not followed, so a message holding a code cannot be forwarded to another host; like a dropped
 * connection or no answer within `timeoutMs`, one leaves the outcome unknown.
 */
export function postToProvider(
  label: string,
  url: string,
  payload: Record<string, string>,
  timeoutMs: number,
): Promise<string | undefined> {
  const target = new URL(url);
  const agent = target.protocol === "https:" ? agents["https:"] : agents["http:"];
  const request = target.protocol === "https:" ? httpsRequest : httpRequest;
  const body = Buffer.from(JSON.stringify(payload));
  return new Promise<string | undefined>((resolve, reject) => {
    let answered = false;
    const req = request(target, {
      method: "POST",
      agent,
      headers: {
        "content-type": "application/json",
        accept: "application/json",
        "content-length": body.length,
      },
    });
    // The call's deadline covers the whole exchange, its answer's body included.
    const timer = setTimeout(() => {
      req.destroy(new DeadlineError());
    }, timeoutMs);
    const done = () => {
      clearTimeout(timer);
    };
    req.on("error", (err) => {
      done();
      // Once a 2xx has come, the message is accepted: a later failure only loses its id.
      if (answered) return;
      reject(failure(label, timeoutMs, err));
    });
    req.on("response", (res) => {
      answered = true;
      const status = res.statusCode ?? 0;
      if (status < 200 || status > 299) {
        done();
        res.resume();
        reject(refusal(label, status));
        return;
      }
      readAnswer(res).then(
        (id) => {
          done();
          resolve(id);
        },
        () => {
          done();
          resolve(undefined);
        },
      );
    });
    req.end(body);
  });
}

/** The provider's id from a 2xx answer's body, if it holds one. */
function readAnswer(res: IncomingMessage): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    res.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > ANSWER_BYTES_MAX) {
        res.destroy();
        resolve(undefined);
        return;
      }
      chunks.push(chunk);
    });
    res.on("error", reject);
    res.on("aborted", () => {
      resolve(undefined);
    });
    res.on("end", () => {
      try {
        const parsed = Answer.safeParse(JSON.parse(Buffer.concat(chunks).toString("utf8")));
        resolve(parsed.success ? parsed.data.id : undefined);
      } catch {
        resolve(undefined);
      }
    });
  });
}

/** A non-2xx answer. 4xx says the message itself was refused; 408, 429 and 5xx may pass later. */
function refusal(label: string, status: number): DeliveryError {
  if (status >= 300 && status <= 399) {
    // Not followed: what the provider made of the message is not known.
    return new DeliveryError(`${label} answered a redirect (${status}), not followed`, true, {
      outcomeUnknown: true,
    });
  }
  const retryable = status >= 500 || status === 408 || status === 429;
  return new DeliveryError(`${label} answered ${status}`, retryable);
}

class DeadlineError extends Error {
  override readonly name = "DeadlineError";
}

function failure(label: string, timeoutMs: number, err: Error): DeliveryError {
  if (err instanceof DeadlineError) {
    return new DeliveryError(`${label} did not answer within ${timeoutMs} ms`, true, {
      outcomeUnknown: true,
    });
  }
  const code = "code" in err && typeof err.code === "string" ? err.code : "network error";
  // Refused or unresolved: nothing reached the provider. Anything else may have, after the request.
  return new DeliveryError(`${label} unreachable: ${code}`, true, { outcomeUnknown: !NEVER_SENT.test(code) });
}
