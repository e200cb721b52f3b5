/**
 * The email and password fields and their checks, shared by the sign-in page and the password
 * reset pages, so each says the same thing the same way (the server checks again: §4.1 and
 * docs/security.md "Password reset").
 */
import { LIMITS } from '../../src/config/limits.ts';
import { Field } from './ui.tsx';

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

/** What is wrong with an email address as typed, or undefined. */
export function emailError(email: string): string | undefined {
  if (!email.trim()) return 'Enter your email address.';
  return EMAIL.test(email.trim()) ? undefined : 'Enter a valid email address, like you@example.com.';
}

/** What is wrong with a password: `isNew` when it is being chosen (sign-up, reset), which adds the minimum length. */
export function passwordError(password: string, isNew: boolean): string | undefined {
  if (!password) return isNew ? 'Enter a new password.' : 'Enter your password.';
  if (isNew && password.length < LIMITS.passwordMinLength) return `Use at least ${LIMITS.passwordMinLength} characters.`;
  if (password.length > LIMITS.passwordMaxLength) return `Use at most ${LIMITS.passwordMaxLength} characters.`;
  return undefined;
}

export const NEW_PASSWORD_HINT = `At least ${LIMITS.passwordMinLength} characters; common passwords are refused.`;

export function EmailField({ value, onChange, error }: { value: string; onChange: (value: string) => void; error?: string | undefined }) {
  return (
    <Field label="Email" error={error}>
      {({ id, describedBy, invalid }) => (
        <input
          id={id}
          type="email"
          value={value}
          onChange={(e) => onChange(e.target.value)}
          autoComplete="email"
          aria-describedby={describedBy}
          aria-invalid={invalid}
          required
        />
      )}
    </Field>
  );
}

export function PasswordField(props: {
  label: string;
  value: string;
  onChange: (value: string) => void;
  error?: string | undefined;
  hint?: string | undefined;
  autoComplete: 'current-password' | 'new-password';
}) {
  return (
    <Field label={props.label} error={props.error} hint={props.hint}>
      {({ id, describedBy, invalid }) => (
        <input
          id={id}
          type="password"
          value={props.value}
          onChange={(e) => props.onChange(e.target.value)}
          autoComplete={props.autoComplete}
          aria-describedby={describedBy}
          aria-invalid={invalid}
          required
        />
      )}
    </Field>
  );
}
