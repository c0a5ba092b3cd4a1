/**
 * A value now or later. The hot paths (a token from a kept client and key) answer with the
 * value itself when nothing needs waiting for: each promise and `await` they skip is a microtask
 * less (and, under an AsyncLocalStorage such as tracing's, async-hook callbacks less).
 * A function that answers an `Awaitable` may still throw at once; `await` takes both kinds.
 */
export type Awaitable<T> = T | Promise<T>;

/** `next` of the value: at once when the value is there, after it otherwise. */
export function andThen<T, U>(value: Awaitable<T>, next: (value: T) => Awaitable<U>): Awaitable<U> {
  return value instanceof Promise ? value.then(next) : next(value);
}

/**
 * `next` of what `start` answers, `failed` of what it throws or rejects with: one place for the
 * success and failure of a call that may answer now or later.
 */
export function settle<T, U>(
  start: () => Awaitable<T>,
  next: (value: T) => U,
  failed: (err: unknown) => U,
): Awaitable<U> {
  let value: Awaitable<T>;
  try {
    value = start();
  } catch (err) {
    return failed(err);
  }
  return value instanceof Promise ? value.then(next, failed) : next(value);
}
