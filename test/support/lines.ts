/** Each line of a child process's output as it arrives, the last one even without its newline. */
export async function forEachLine(stream: ReadableStream<Uint8Array>, fn: (line: string) => void): Promise<void> {
  const decoder = new TextDecoder();
  let rest = "";
  for await (const chunk of stream) {
    const lines = (rest + decoder.decode(chunk, { stream: true })).split("\n");
    rest = lines.pop()!;
    for (const line of lines) fn(line);
  }
  rest += decoder.decode();
  if (rest) fn(rest);
}
