/**
 * Running a batch of async jobs at a bounded concurrency, the way a discovery pool does: at most
 * `limit` jobs in flight, the next one started as soon as one settles. The first rejection is
 * rethrown once every started job has settled (nothing is left running behind the caller's back).
 */
export async function mapLimit<T, R>(items: readonly T[], limit: number, job: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  let failure: { error: unknown } | undefined;
  const lane = async (): Promise<void> => {
    while (failure === undefined && next < items.length) {
      const index = next++;
      try {
        results[index] = await job(items[index] as T, index);
      } catch (error) {
        failure ??= { error };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, lane));
  if (failure !== undefined) throw failure.error;
  return results;
}
