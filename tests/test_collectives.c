/* placeholder: being written */
int main(void) { return 99; }
