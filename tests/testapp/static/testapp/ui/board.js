const end = "</script>";
window.boardLoaded = 1 < 2;
