"""What every layer may use: the errors that reach the user as one line, installed versions, redaction."""
