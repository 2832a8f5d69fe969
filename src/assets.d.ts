// Files Bun imports as text or as embedded paths (`with { type: "text" | "file" }`).
declare module "*.sql" {
  const text: string;
  export default text;
}
declare module "*.so.1" {
  const path: string;
  export default path;
}
